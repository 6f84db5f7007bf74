//go:build unix

package planner_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used: on a loaded machine it
// varies less than the elapsed time, which includes waiting for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
