package budget

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
)

const meminfo = `MemTotal:       24576000 kB
MemFree:         1000000 kB
MemAvailable:   20000000 kB
Buffers:           12345 kB
`

func TestMachineBudgetFromMeminfo(t *testing.T) {
	t.Parallel()
	b := system{meminfo: meminfo}.budget()
	assert.Equal(t, int64(20000000*1024/100*80), b.Bytes, "80% of MemAvailable")
	assert.Equal(t, "80% of what MemAvailable leaves", b.From)
	assert.False(t, b.FromUser())
}

func TestMachineBudgetTakesTheLeast(t *testing.T) {
	t.Parallel()
	// A cgroup limit of 8 GiB with 2 GiB in use leaves 6 GiB: less than MemAvailable.
	b := system{meminfo: meminfo, cgroupMax: "8589934592\n", cgroupCur: "2147483648\n"}.budget()
	assert.Equal(t, int64(6<<30)/100*80, b.Bytes)
	assert.Contains(t, b.From, "cgroup")

	// The page cache the kernel drops first is not counted as used: 2 GiB in use of which
	// 1.5 GiB are inactive file pages leave 7.5 GiB.
	b = system{meminfo: meminfo, cgroupMax: "8589934592\n", cgroupCur: "2147483648\n", cgroupCache: "1610612736"}.budget()
	assert.Equal(t, int64(7680<<20)/100*80, b.Bytes)

	// cgroup v2 "max" and v1's near-2^63 figure mean no limit.
	for _, none := range []string{"max\n", "9223372036854771712\n"} {
		b = system{meminfo: meminfo, cgroupMax: none, cgroupCur: "1"}.budget()
		assert.Equal(t, "80% of what MemAvailable leaves", b.From, none)
	}

	// ulimit -v 4 GiB with 1 GiB of address space in use leaves 3 GiB.
	b = system{meminfo: meminfo, status: "Name:\tcoredag\nVmPeak:\t 1100000 kB\nVmSize:\t 1048576 kB\n", rlimitAS: 4 << 30}.budget()
	assert.Equal(t, int64(3<<30)/100*80, b.Bytes)
	assert.Contains(t, b.From, "ulimit -v")

	// An address space already past the limit leaves nothing.
	b = system{meminfo: meminfo, status: "VmSize:\t 5000000 kB\n", rlimitAS: 4 << 30}.budget()
	assert.Zero(t, b.Bytes)

	// Nothing readable: the fallback.
	b = system{meminfo: "garbage"}.budget()
	assert.Equal(t, int64(Fallback), b.Bytes)
	assert.Contains(t, b.From, "fallback")
}

func TestResolve(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }

	b, err := Resolve(Flag, "8GiB", getenv)
	require.NoError(t, err)
	assert.Equal(t, Budget{Bytes: 8 << 30, From: "--mem", Knob: Flag}, b)

	env[EnvVar] = "512MiB"
	b, err = Resolve(Flag, "", getenv)
	require.NoError(t, err)
	assert.Equal(t, Budget{Bytes: 512 << 20, From: EnvVar, Knob: Flag}, b)
	b, err = Resolve(Flag, "1KiB", getenv)
	require.NoError(t, err)
	assert.Equal(t, int64(1024), b.Bytes, "the flag wins over the environment")

	env[EnvVar] = "lots"
	_, err = Resolve(Flag, "", getenv)
	assert.ErrorContains(t, err, "COREDAG_MEM=lots: invalid integer literal")
	for _, bad := range []string{"0", "-1GiB", "8GB", "1.5GiB"} {
		_, err = Resolve(Flag, bad, getenv)
		assert.ErrorContains(t, err, "--mem "+bad, bad)
	}

	delete(env, EnvVar)
	b, err = Resolve(Flag, "", getenv)
	require.NoError(t, err)
	assert.Positive(t, b.Bytes, "the machine's budget")
	assert.False(t, b.FromUser())
}

func TestFormat(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0: "0 bytes", 1: "1 byte", 1023: "1023 bytes", 1024: "1 KiB", 1536: "1.5 KiB",
		16 << 20: "16 MiB", 1<<30 - 1: "1 GiB", 20 << 30: "20 GiB", 32<<30 + 100<<20: "32.1 GiB",
		123456789012: "115 GiB", 8 << 40: "8 TiB", math.MaxInt64: "more than 8 EiB",
	} {
		assert.Equal(t, want, Format(n), "%d", n)
	}
}

// TestSetting: a hint's figure is written as --mem and COREDAG_MEM read it, back to the bytes.
func TestSetting(t *testing.T) {
	t.Parallel()
	flag := Budget{Bytes: 1, From: "--mem", Knob: Flag}
	for n, want := range map[int64]string{
		1: "--mem 1", 2047: "--mem 2047", 2048: "--mem 2KiB", 18 << 10: "--mem 18KiB", 3 << 20: "--mem 3MiB",
		1<<30 + 1<<10: "--mem 1048577KiB", 5 << 40: "--mem 5TiB", math.MaxInt64: "--mem 9223372036854775807",
	} {
		assert.Equal(t, want, flag.Setting(n), "%d", n)
		v, err := Parse(want[len("--mem "):])
		require.NoError(t, err, want)
		assert.Equal(t, n, v, want)
	}
	assert.Equal(t, "COREDAG_MEM=2KiB", Budget{Bytes: 1, From: EnvVar}.Setting(2048))
	assert.Equal(t, "--mem 2KiB", Budget{Bytes: 1, From: "80% of what MemAvailable leaves"}.Setting(2048), "the machine's figure: the flag sets another")
	assert.Empty(t, Budget{Bytes: 1, From: "--mem", Asked: 1 << 30}.Setting(2048), "lowered for ulimit -v: a larger figure does not help")
}

func TestSaturatingArithmetic(t *testing.T) {
	t.Parallel()
	assert.Equal(t, int64(12), Mul(3, 4))
	assert.Equal(t, int64(0), Mul(0, math.MaxInt64))
	assert.Equal(t, int64(math.MaxInt64), Mul(1<<62, 8), "2^65 saturates")
	assert.Equal(t, int64(6), Add(1, 2, 3))
	assert.Equal(t, int64(math.MaxInt64), Add(math.MaxInt64-1, 2))
}

func TestCheck(t *testing.T) {
	t.Parallel()
	b := Budget{Bytes: 20 << 30, From: "80% of what MemAvailable leaves"}
	assert.NoError(t, b.Check(20<<30, "exactly the budget", ""))
	err := b.Check(64<<30, "buffers need 64 GiB", "lower the sizes")
	require.Error(t, err)
	assert.Equal(t, "buffers need 64 GiB; the memory budget is 20 GiB (set with --mem or COREDAG_MEM): lower the sizes", err.Error())

	be := err.(*Error)
	be.Pos = diag.At("plan.dag", 3, 8)
	assert.Equal(t, "plan.dag:3:8: buffers need 64 GiB; the memory budget is 20 GiB (set with --mem or COREDAG_MEM): lower the sizes", be.Error())

	err = Budget{Bytes: 1024, From: "--mem", Knob: Flag}.Check(2048, "it needs 2 KiB", "")
	assert.EqualError(t, err, "it needs 2 KiB; the memory budget is 1 KiB (set with --mem)")
}

// TestResolveCappedByAddressLimit: a budget from --mem or the environment larger than what the
// address-space limit leaves is lowered to the machine's figure for it, and says so; one that
// fits, or one under no limit, is kept. (--mem 100GiB under ulimit -v 2000000 died in the Go
// runtime instead of refusing.)
func TestResolveCappedByAddressLimit(t *testing.T) {
	t.Parallel()
	limited := system{meminfo: meminfo, status: "VmSize:\t 1048576 kB\n", rlimitAS: 3 << 30} // 2 GiB left
	room := int64(2<<30) / 100 * 80
	env := map[string]string{EnvVar: "64GiB"}
	for _, tc := range []struct {
		flag string
		from string
	}{{"100GiB", "--mem"}, {"", EnvVar}} {
		b, err := resolve(Flag, tc.flag, func(k string) string { return env[k] }, limited)
		require.NoError(t, err)
		assert.Equal(t, room, b.Bytes, tc.from)
		assert.Equal(t, tc.from, b.From)
		assert.True(t, b.FromUser())
		assert.Positive(t, b.Asked)
		assert.Contains(t, b.Source(), tc.from+" ")
		assert.Contains(t, b.Source(), ", lowered to 80% of what the address-space limit (ulimit -v) leaves")
		assert.Contains(t, b.Note(), "more than the address-space limit (ulimit -v) leaves: the memory budget is 1.6 GiB")
	}
	b, err := resolve(Flag, "100GiB", func(string) string { return "" }, limited)
	require.NoError(t, err)
	assert.Equal(t, "--mem 100 GiB, lowered to 80% of what the address-space limit (ulimit -v) leaves", b.Source())
	err = b.Check(2<<30, "it needs 2 GiB", "")
	assert.EqualError(t, err, "it needs 2 GiB; the memory budget is 1.6 GiB (--mem 100 GiB, lowered to 80% of what the address-space limit (ulimit -v) leaves)")

	b, err = resolve(Flag, "1GiB", func(string) string { return "" }, limited)
	require.NoError(t, err)
	assert.Equal(t, Budget{Bytes: 1 << 30, From: "--mem", Knob: Flag}, b, "fits: kept")
	assert.Empty(t, b.Note())
	b, err = resolve(Flag, "100GiB", func(string) string { return "" }, system{meminfo: meminfo})
	require.NoError(t, err)
	assert.Equal(t, Budget{Bytes: 100 << 30, From: "--mem", Knob: Flag}, b, "no limit: kept")
}

// TestResolveExhausted: a machine that leaves nothing gives a budget of 0 bytes, which the
// options that take a budget read as none at all (no op limit, no check of the plan's arrays):
// Resolve refuses it instead, saying which figure leaves nothing and what would give room. A
// user's figure is refused alike when the address-space limit lowers it to 0, and kept when only
// the cgroup or MemAvailable leave nothing (they do not lower it).
func TestResolveExhausted(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	past := system{meminfo: meminfo, status: "VmSize:\t 5000000 kB\n", rlimitAS: 4 << 30} // 4.77 GiB mapped, 4 GiB allowed
	_, err := resolve(Flag, "", none, past)
	assert.EqualError(t, err, "the memory budget is 0 bytes (80% of what the address-space limit (ulimit -v) leaves), too little for anything: "+
		"this process already maps 4.77 GiB of address space, and the address-space limit (ulimit -v) allows 4 GiB: raise the limit, or lift it (ulimit -v unlimited)")
	// 50 bytes left, 80% of which rounds to 0.
	_, err = resolve(Flag, "", none, system{meminfo: meminfo, status: "VmSize:\t 1048576 kB\n", rlimitAS: 1<<30 + 50})
	assert.ErrorContains(t, err, "the memory budget is 0 bytes (80% of what the address-space limit (ulimit -v) leaves)")

	_, err = resolve(Flag, "8GiB", none, past)
	assert.EqualError(t, err, "the memory budget is 0 bytes (--mem 8 GiB, lowered to 80% of what the address-space limit (ulimit -v) leaves), too little for anything: "+
		"this process already maps 4.77 GiB of address space, and the address-space limit (ulimit -v) allows 4 GiB: raise the limit, or lift it (ulimit -v unlimited)")
	_, err = resolve(Flag, "", func(string) string { return "1GiB" }, past)
	assert.ErrorContains(t, err, "the memory budget is 0 bytes (COREDAG_MEM 1 GiB, lowered to 80% of what the address-space limit (ulimit -v) leaves)")

	full := system{meminfo: meminfo, cgroupMax: "2147483648\n", cgroupCur: "2147483648\n"}
	_, err = resolve(Flag, "", none, full)
	assert.EqualError(t, err, "the memory budget is 0 bytes (80% of what the cgroup's memory limit leaves), too little for anything: "+
		"the cgroup uses 2 GiB of its memory limit of 2 GiB: free memory in it or raise its limit, or set a budget with --mem or COREDAG_MEM")
	b, err := resolve(Flag, "1GiB", none, full)
	require.NoError(t, err)
	assert.Equal(t, Budget{Bytes: 1 << 30, From: "--mem", Knob: Flag}, b)

	_, err = resolve(Flag, "", none, system{meminfo: "MemAvailable:\t0 kB\n"})
	assert.EqualError(t, err, "the memory budget is 0 bytes (80% of what MemAvailable leaves), too little for anything: "+
		"the kernel reports 0 bytes available (MemAvailable in /proc/meminfo): free memory, or set a budget with --mem or COREDAG_MEM")
}

// TestCgroupFiles: the limit, usage and reclaimable page cache are read from cgroup v2's files
// at the path /proc/self/cgroup names, or from v1's.
func TestCgroupFiles(t *testing.T) {
	t.Parallel()
	v2 := map[string]string{
		"/proc/self/cgroup":                 "0::/job\n",
		"/sys/fs/cgroup/job/memory.max":     "8589934592\n",
		"/sys/fs/cgroup/job/memory.current": "2147483648\n",
		"/sys/fs/cgroup/job/memory.stat":    "anon 1000\nfile 2000\ninactive_file_x 5\ninactive_file 1610612736\n",
	}
	limit, usage, cache := cgroupFiles(func(name string) string { return v2[name] })
	assert.Equal(t, []string{"8589934592\n", "2147483648\n", "1610612736"}, []string{limit, usage, cache})

	v1 := map[string]string{
		"/proc/self/cgroup": "4:memory:/job\n0::/\n",
		"/sys/fs/cgroup/memory/job/memory.limit_in_bytes": "1073741824\n",
		"/sys/fs/cgroup/memory/job/memory.usage_in_bytes": "536870912\n",
		"/sys/fs/cgroup/memory/job/memory.stat":           "cache 100\ninactive_file 7\ntotal_inactive_file 268435456\n",
	}
	limit, usage, cache = cgroupFiles(func(name string) string { return v1[name] })
	assert.Equal(t, []string{"1073741824\n", "536870912\n", "268435456"}, []string{limit, usage, cache})

	// A cache figure larger than the usage (read at different moments) leaves the usage at 0.
	s := system{cgroupMax: limit, cgroupCur: "10", cgroupCache: "20"}
	assert.Equal(t, int64(0), s.cgroupUsed())
}

// TestKnob: a library caller's budget is set with its own knob, and messages name that knob,
// not the command's --mem; a caller with no knob of its own (Env) is pointed at COREDAG_MEM alone.
func TestKnob(t *testing.T) {
	t.Parallel()
	opt := Knob{Name: "Options.Memory", Form: "Options.Memory = %[2]s or mem=%[1]s"}
	none := func(string) string { return "" }
	b, err := resolve(opt, "1MiB", none, system{meminfo: meminfo})
	require.NoError(t, err)
	assert.Equal(t, Budget{Bytes: 1 << 20, From: "Options.Memory", Knob: opt}, b)
	assert.True(t, b.FromUser())
	assert.Equal(t, "set with Options.Memory", b.Source())
	assert.Equal(t, "Options.Memory = 18432 or mem=18KiB", b.Setting(18<<10))
	_, err = resolve(opt, "lots", none, system{meminfo: meminfo})
	assert.ErrorContains(t, err, "Options.Memory = lots or mem=lots: invalid integer literal")

	b, err = resolve(opt, "", func(string) string { return "2MiB" }, system{meminfo: meminfo})
	require.NoError(t, err)
	assert.Equal(t, "set with COREDAG_MEM", b.Source())
	assert.Equal(t, "COREDAG_MEM=18KiB", b.Setting(18<<10))

	b, err = resolve(opt, "", none, system{meminfo: meminfo})
	require.NoError(t, err)
	assert.Equal(t, "set with Options.Memory or COREDAG_MEM", b.Source())
	assert.Equal(t, "Options.Memory = 18432 or mem=18KiB", b.Setting(18<<10))
	_, err = resolve(opt, "", none, system{meminfo: "MemAvailable:\t0 kB\n"})
	assert.ErrorContains(t, err, "or set a budget with Options.Memory or COREDAG_MEM")

	b, err = resolve(Env, "", none, system{meminfo: meminfo})
	require.NoError(t, err)
	assert.Equal(t, "set with COREDAG_MEM", b.Source())
	assert.Equal(t, "COREDAG_MEM=18KiB", b.Setting(18<<10))
}
