package budget

import (
	"bufio"
	"os"
	"path"
	"strconv"
	"strings"
)

// Machine returns the budget the machine allows (see the package comment), or Fallback.
func Machine() Budget { return machine().budget() }

// machine reads what the machine says about its memory.
func machine() system {
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			return ""
		}
		return string(b)
	}
	s := system{meminfo: read("/proc/meminfo"), status: read("/proc/self/status")}
	s.cgroupMax, s.cgroupCur = cgroupFiles(read)
	s.rlimitAS = addressLimit()
	return s
}

// system is what the machine says about its memory, as read from its files.
type system struct {
	meminfo   string // /proc/meminfo
	status    string // /proc/self/status (VmSize: the address space already in use)
	cgroupMax string // memory.max (cgroup v2) or memory.limit_in_bytes (v1); "" if none
	cgroupCur string // memory.current or memory.usage_in_bytes
	rlimitAS  uint64 // RLIMIT_AS; 0 when unlimited or unknown
}

// budget takes share percent of the least free memory any source reports.
func (s system) budget() Budget {
	best, from := int64(-1), ""
	offer := func(n int64, what string) {
		if n >= 0 && (best < 0 || n < best) {
			best, from = n, what
		}
	}
	if kb, ok := field(s.meminfo, "MemAvailable:"); ok {
		offer(kb*1024, "MemAvailable")
	}
	if limit, ok := parseLimit(s.cgroupMax); ok {
		cur, _ := parseLimit(s.cgroupCur)
		offer(max(0, limit-cur), "the cgroup's memory limit")
	}
	if left, ok := s.addressLeft(); ok {
		offer(left, "the address-space limit (ulimit -v)")
	}
	if best < 0 {
		return Budget{Bytes: Fallback, From: "the fallback (the machine's memory could not be read)"}
	}
	return Budget{Bytes: best / 100 * share, From: strconv.Itoa(share) + "% of what " + from + " leaves"}
}

// addressLeft is what the address-space limit (RLIMIT_AS) leaves of the address space, if
// there is a limit.
func (s system) addressLeft() (int64, bool) {
	if s.rlimitAS == 0 || s.rlimitAS >= 1<<62 {
		return 0, false
	}
	used, _ := field(s.status, "VmSize:")
	return max(0, int64(s.rlimitAS)-used*1024), true
}

// addressRoom is the budget the address-space limit allows: share percent of what it leaves.
func (s system) addressRoom() (int64, bool) {
	left, ok := s.addressLeft()
	return left / 100 * share, ok
}

// field finds "Name:   123 kB" in a /proc file and returns 123.
func field(text, name string) (int64, bool) {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		return n, err == nil && n >= 0
	}
	return 0, false
}

// parseLimit reads a cgroup figure: bytes, or "max" (no limit, reported as not ok). Version 1
// writes no limit as a number near 2^63.
func parseLimit(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n >= 1<<60 {
		return 0, false
	}
	return n, true
}

// cgroupFiles reads the memory limit and usage of this process's cgroup: version 2 first (the
// unified hierarchy, at the path /proc/self/cgroup names or at its root), then version 1.
func cgroupFiles(read func(string) string) (limit, usage string) {
	var v2, v1 string
	for _, line := range strings.Split(read("/proc/self/cgroup"), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case strings.Contains(","+parts[1]+",", ",memory,"):
			v1 = parts[2]
		}
	}
	for _, dir := range []string{path.Join("/sys/fs/cgroup", v2), "/sys/fs/cgroup"} {
		if m := read(path.Join(dir, "memory.max")); m != "" {
			return m, read(path.Join(dir, "memory.current"))
		}
	}
	for _, dir := range []string{path.Join("/sys/fs/cgroup/memory", v1), "/sys/fs/cgroup/memory"} {
		if m := read(path.Join(dir, "memory.limit_in_bytes")); m != "" {
			return m, read(path.Join(dir, "memory.usage_in_bytes"))
		}
	}
	return "", ""
}
