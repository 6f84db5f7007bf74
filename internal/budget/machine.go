package budget

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
)

// Machine returns the budget the machine allows (see the package comment), or Fallback. Its
// Bytes are 0 when a source leaves nothing (Resolve refuses such a budget).
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
	s.cgroupMax, s.cgroupCur, s.cgroupCache = cgroupFiles(read)
	s.rlimitAS = addressLimit()
	return s
}

// system is what the machine says about its memory, as read from its files.
type system struct {
	meminfo   string // /proc/meminfo
	status    string // /proc/self/status (VmSize: the address space already in use)
	cgroupMax string // memory.max (cgroup v2) or memory.limit_in_bytes (v1); "" if none
	cgroupCur string // memory.current or memory.usage_in_bytes
	// cgroupCache is the page cache the kernel may drop first, which cgroupCur counts: the
	// inactive_file of memory.stat (v2), total_inactive_file (v1); "" if unknown.
	cgroupCache string
	rlimitAS    uint64 // RLIMIT_AS; 0 when unlimited or unknown
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
		offer(kb*1024, fromMemAvailable)
	}
	if limit, ok := parseLimit(s.cgroupMax); ok {
		offer(max(0, limit-s.cgroupUsed()), fromCgroup)
	}
	if left, ok := s.addressLeft(); ok {
		offer(left, fromAddress)
	}
	if best < 0 {
		return Budget{Bytes: Fallback, From: "the fallback (the machine's memory could not be read)"}
	}
	return Budget{Bytes: best / 100 * share, From: leaves(from)}
}

// The sources of the machine's budget, as its From names them (leaves).
const (
	fromMemAvailable = "MemAvailable"
	fromCgroup       = "the cgroup's memory limit"
	fromAddress      = "the address-space limit (ulimit -v)"
)

// leaves is the From of a budget taken from source.
func leaves(source string) string { return strconv.Itoa(share) + "% of what " + source + " leaves" }

// exhausted is the refusal of b, a budget of 0 bytes that s's figures leave (budget, or a user's
// figure lowered by addressRoom): which figures leave nothing, and what would give room. A budget
// of 0 bytes holds nothing; it must not pass for no budget, which is what 0 means to the
// options that take one (elaborate.Options, prove.Options).
func (s system) exhausted(b Budget) error {
	from := b.From
	if b.Asked > 0 {
		from = b.Source()
	}
	var why string
	switch {
	case b.Asked > 0 || b.From == leaves(fromAddress):
		used, _ := field(s.status, "VmSize:")
		why = fmt.Sprintf("this process already maps %s of address space, and the address-space limit (ulimit -v) allows %s: raise the limit, or lift it (ulimit -v unlimited)",
			Format(used*1024), Format(int64(s.rlimitAS)))
	case b.From == leaves(fromCgroup):
		limit, _ := parseLimit(s.cgroupMax)
		why = fmt.Sprintf("the cgroup uses %s of its memory limit of %s: free memory in it or raise its limit, or set a budget with %s",
			Format(s.cgroupUsed()), Format(limit), b.settings())
	default:
		kb, _ := field(s.meminfo, "MemAvailable:")
		why = fmt.Sprintf("the kernel reports %s available (MemAvailable in /proc/meminfo): free memory, or set a budget with %s",
			Format(kb*1024), b.settings())
	}
	return fmt.Errorf("the memory budget is 0 bytes (%s), too little for anything: %s", from, why)
}

// cgroupUsed is the cgroup's usage less the page cache the kernel reclaims before it runs out
// (files read and not touched since: the inactive file pages), as container runtimes count a
// working set. Usage counts all the page cache, so a cgroup that has read many files (a build,
// a CI job) would otherwise seem full while its memory is there for the taking.
func (s system) cgroupUsed() int64 {
	cur, _ := parseLimit(s.cgroupCur)
	if cache, ok := parseLimit(s.cgroupCache); ok {
		return max(0, cur-cache)
	}
	return cur
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

// cgroupFiles reads the memory limit, usage and reclaimable page cache of this process's cgroup:
// version 2 first (the unified hierarchy, at the path /proc/self/cgroup names or at its root),
// then version 1.
func cgroupFiles(read func(string) string) (limit, usage, cache string) {
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
			return m, read(path.Join(dir, "memory.current")), statField(read(path.Join(dir, "memory.stat")), "inactive_file")
		}
	}
	for _, dir := range []string{path.Join("/sys/fs/cgroup/memory", v1), "/sys/fs/cgroup/memory"} {
		if m := read(path.Join(dir, "memory.limit_in_bytes")); m != "" {
			return m, read(path.Join(dir, "memory.usage_in_bytes")), statField(read(path.Join(dir, "memory.stat")), "total_inactive_file")
		}
	}
	return "", "", ""
}

// statField is the figure of the line "name N" of a cgroup's memory.stat, or "".
func statField(stat, name string) string {
	for _, line := range strings.Split(stat, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			return f[1]
		}
	}
	return ""
}
