//go:build !linux

package exec

import "time"

// ProcessCPU is the CPU time the process has used; ok is false: it is not measured outside Linux.
func ProcessCPU() (d time.Duration, ok bool) { return 0, false }

// threadCPU is the calling thread's CPU time; not measured outside Linux.
func threadCPU() (time.Duration, bool) { return 0, false }

// ThreadCPU is the CPU time, user and system, the calling OS thread has used (the caller must be
// locked to its thread, runtime.LockOSThread); ok is false where the OS does not tell.
func ThreadCPU() (d time.Duration, ok bool) { return threadCPU() }
