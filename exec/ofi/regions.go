//go:build linux

package ofi

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// libfabric's shm keeps each endpoint's queues in a shared-memory file, /dev/shm/NAME, NAME being
// the endpoint's name (endpointName), and removes it when the endpoint closes or the process
// ends on SIGTERM or SIGINT. A process that ends otherwise (MPI_Abort; SIGKILL: the OOM killer,
// a launcher's or batch system's kill) leaves its files behind, a few MiB of the node's memory
// each for as long as the node runs. So each endpoint's process holds a shared lock on
// its file (holdRegion), and a process that names its first shm endpoint removes the files
// left by processes that are gone (sweepRegions).

// shmDir is where shm_open(3) puts its files on Linux.
const shmDir = "/dev/shm"

// staleAge is how old a file must be before sweepRegions removes it: a process that just
// created its file may not have locked it yet. A minute is far more than that takes.
const staleAge = time.Minute

// regionName matches endpointName's names: "cd", the process id and a sequence number, base 36.
var regionName = regexp.MustCompile(`^cd([0-9a-z]+)\.[0-9a-z]+$`)

// holdRegion takes a shared lock on endpoint name's file in dir and returns the file holding it,
// to close when the endpoint has closed (the kernel drops the lock when the process ends,
// however it ends). The lock tells sweepRegions that the file is in use, even where the owner's
// process id means nothing (another pid namespace sharing dir).
func holdRegion(dir, name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sweepRegions removes the files in dir that endpointName named for a process that no longer
// runs (self, this process, has none yet: it sweeps before naming its first endpoint), that
// this user owns, that are older than staleAge at now, and that no process holds a lock on.
// It returns the names removed; a file it cannot judge stays.
func sweepRegions(dir string, self int, now time.Time) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		m := regionName.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		pid, err := strconv.ParseInt(m[1], 36, 32)
		if err != nil || pid <= 0 || (int(pid) != self && !gone(int(pid))) {
			continue
		}
		if sweepRegion(filepath.Join(dir, e.Name()), now) {
			removed = append(removed, e.Name())
		}
	}
	return removed
}

// gone reports whether no process has id pid (in this pid namespace).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// sweepRegion removes path if this user owns it, it is older than staleAge at now and nobody
// holds a lock on it; it reports whether it did.
func sweepRegion(path string, now time.Time) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < staleAge {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return false
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false // an owner holds it (holdRegion)
	}
	return os.Remove(path) == nil
}
