package exec

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// quietNice is the nice value quietOtherThreads gives the threads other than the caller's.
const quietNice = 19

// quietOtherThreads sets every thread of the process except the calling one (which must be
// locked to its goroutine) to nice quietNice, and returns a function that puts back the values
// they had and gives threads started meanwhile the caller's, as far as the process may raise
// priorities.
func quietOtherThreads() (restore func()) {
	self := unix.Gettid()
	p, err := unix.Getpriority(unix.PRIO_PROCESS, self)
	if err != nil {
		return func() {}
	}
	own := 20 - p // getpriority returns 20 - nice for PRIO_PROCESS on Linux
	was := map[int]int{}
	for _, tid := range threadIDs() {
		if tid == self {
			continue
		}
		p, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
		if err != nil {
			continue
		}
		if was[tid] = 20 - p; was[tid] < quietNice {
			unix.Setpriority(unix.PRIO_PROCESS, tid, quietNice)
		}
	}
	return func() {
		for _, tid := range threadIDs() {
			nice, ok := was[tid]
			if !ok {
				nice = own
			}
			if tid != self {
				unix.Setpriority(unix.PRIO_PROCESS, tid, nice) // EPERM without CAP_SYS_NICE: stays low
			}
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
