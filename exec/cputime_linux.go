package exec

import (
	"time"

	"golang.org/x/sys/unix"
)

// ProcessCPU is the CPU time the process has used, user and system, over all its threads
// (getrusage RUSAGE_SELF); ok is false where the OS does not tell. Overlap and the benchmarks
// report it per iteration.
func ProcessCPU() (d time.Duration, ok bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// threadCPU is the CPU time the calling OS thread has used; the caller must be locked to it.
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// ThreadCPU is the CPU time, user and system, the calling OS thread has used (the caller must be
// locked to its thread, runtime.LockOSThread); ok is false where the OS does not tell.
func ThreadCPU() (d time.Duration, ok bool) { return threadCPU() }
