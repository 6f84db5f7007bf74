//go:build linux

package ofi

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// shm settles per pair of processes whether a message moves by CMA or by segments: CMA is off
// if either side disabled it. Each process used to measure CMACost on its own, and where the
// figure sits near the limit (1.8 to 2.4 on a 2-core Xeon with four ranks measuring at once,
// against a limit of 2 then) about one rank in four read it above: its pairs moved by
// segments, the others' by CMA, and which it was changed from one run to the next. So the first
// process of a user on a host measures, under a lock, and leaves its figure in a record that
// every later one reads until the host reboots: the ranks of a job, and the jobs of a boot,
// decide alike.

// cmaRecordWait bounds the wait for the record's lock; past it a process measures on its own.
const cmaRecordWait = 2 * time.Second

// cmaRecordMax is the most of a record read: a boot id and a figure take about 60 bytes.
const cmaRecordMax = 256

// cmaRecordPath is this user's record in dir.
func cmaRecordPath(dir string) string {
	return filepath.Join(dir, "coredag-cma-"+strconv.Itoa(os.Geteuid()))
}

// sharedCMACost returns the figure this user's record in dir holds for boot, or measures it
// (measure) and records it: the lock on the record makes one process measure while the others
// wait for its figure. Where the record cannot be used (no boot id, no such directory, a file
// someone else owns, open to others or a link, a lock held past wait) the process measures on
// its own and records nothing; a record that does not parse, or is of another boot, is measured
// again.
// A failed measurement (no process_vm_readv) is not recorded: each process finds that out.
func sharedCMACost(dir, boot string, wait time.Duration, measure func() (float64, bool)) (float64, bool) {
	if boot == "" || strings.ContainsAny(boot, " \n") {
		return measure()
	}
	f, err := os.OpenFile(cmaRecordPath(dir), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return measure()
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return measure()
	} else if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() || st.Nlink != 1 {
		return measure() // someone else's, or a hard link to another file
	}
	if lockWithin(f, wait) != nil {
		return measure()
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if c, ok := readCMARecord(f, boot); ok {
		return c, true
	}
	c, ok := measure()
	if ok {
		// The figure exactly as it was measured, so that readers decide as this process does.
		rec := boot + " " + strconv.FormatFloat(c, 'g', -1, 64) + "\n"
		if f.Truncate(0) == nil {
			_, _ = f.WriteAt([]byte(rec), 0)
		}
	}
	return c, ok
}

// lockWithin takes an exclusive lock on f, waiting at most d.
func lockWithin(f *os.File, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// readCMARecord reads a record "BOOT FIGURE\n" of boot, false for any other content.
func readCMARecord(f *os.File, boot string) (float64, bool) {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, cmaRecordMax))
	if err != nil {
		return 0, false
	}
	line, rest, found := bytes.Cut(b, []byte("\n"))
	if !found || len(rest) != 0 {
		return 0, false
	}
	id, fig, ok := strings.Cut(string(line), " ")
	if !ok || id != boot {
		return 0, false
	}
	c, err := strconv.ParseFloat(fig, 64)
	if err != nil || !(c > 0) || c > 1e6 {
		return 0, false
	}
	return c, true
}

// measureCMA is what one copy of 256 KiB by cross-memory attach (process_vm_readv, as shm's
// receiver takes a message out of its sender's memory) costs in copies of the same bytes: the
// median of 3 rounds, each the best of 8 of either (about 0.3 ms in all); false when this
// process cannot use process_vm_readv. A round alone read 1.8 to 2.2 on a quiet 2-core Xeon.
func measureCMA() (float64, bool) {
	const n = 256 << 10
	src, dst := bytes.Repeat([]byte{1}, n), bytes.Repeat([]byte{2}, n) // mapped before the timing
	local, remote := []unix.Iovec{{Base: &dst[0]}}, []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&src[0])), Len: n}}
	local[0].SetLen(n)
	var rounds [3]float64
	for r := range rounds {
		var cma, cp time.Duration
		for i := 0; i < 8; i++ {
			t0 := time.Now()
			if got, err := unix.ProcessVMReadv(os.Getpid(), local, remote, 0); err != nil || got != n {
				return 0, false
			}
			t1 := time.Now()
			copy(dst, src)
			t2 := time.Now()
			if d := t1.Sub(t0); i == 0 || d < cma {
				cma = d
			}
			if d := t2.Sub(t1); i == 0 || d < cp {
				cp = d
			}
		}
		if cp <= 0 {
			return 0, false
		}
		rounds[r] = float64(cma) / float64(cp)
	}
	runtime.KeepAlive(src)
	slices.Sort(rounds[:])
	return rounds[1], true
}
