package exec

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// niceOf reads a thread's nice value from /proc (field 19 of stat); a thread that has exited
// ends the test early.
func niceOf(t *testing.T, tid int) int {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
	if os.IsNotExist(err) {
		t.Skipf("thread %d exited during the test", tid)
	}
	require.NoError(t, err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	n, err := strconv.Atoi(f[16])
	require.NoError(t, err)
	return n
}

func TestQuietOtherThreads(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self := unix.Gettid()
	require.Greater(t, len(threadIDs()), 1, "a Go process has more than one thread")
	before := map[int]int{}
	for _, tid := range threadIDs() {
		before[tid] = niceOf(t, tid)
	}
	restore := quietOtherThreads()
	for tid := range before {
		if tid == self {
			assert.Equal(t, before[tid], niceOf(t, tid), "the calling thread keeps its priority")
		} else {
			assert.Equal(t, quietNice, niceOf(t, tid), "thread %d", tid)
		}
	}
	restore()
	if unix.Setpriority(unix.PRIO_PROCESS, self, before[self]) != nil || os.Geteuid() != 0 {
		t.Skip("this process may not raise priorities back: the other threads stay at nice 19")
	}
	for tid, n := range before {
		assert.Equal(t, n, niceOf(t, tid), "thread %d is back at its nice value", tid)
	}
}
