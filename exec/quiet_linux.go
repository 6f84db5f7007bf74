package exec

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// quietNice is the nice value quietOtherThreads gives the threads other than the caller's.
const quietNice = 19

// quietOtherThreads sets every thread of the process except the calling one (which must be
// locked to its goroutine) to nice quietNice, and returns a function that puts back the values it
// changed, as far as the process may raise priorities.
func quietOtherThreads() (restore func()) {
	self := unix.Gettid()
	was := map[int]int{}
	for _, tid := range threadIDs() {
		if tid == self {
			continue
		}
		// getpriority returns 20 - nice for PRIO_PROCESS on Linux.
		p, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
		if err != nil || 20-p >= quietNice {
			continue
		}
		if unix.Setpriority(unix.PRIO_PROCESS, tid, quietNice) == nil {
			was[tid] = 20 - p
		}
	}
	return func() {
		for tid, nice := range was {
			unix.Setpriority(unix.PRIO_PROCESS, tid, nice) // EPERM without CAP_SYS_NICE: stays low
		}
	}
}

// threadIDs lists the process's threads.
func threadIDs() []int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	ids := make([]int, 0, len(ents))
	for _, e := range ents {
		if id, err := strconv.Atoi(e.Name()); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}
