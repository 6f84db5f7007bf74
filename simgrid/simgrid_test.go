package simgrid

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/e2e"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/predict"
)

func load(t testing.TB, file string, src []byte, params map[string]int64) *ir.Graph {
	t.Helper()
	if src == nil {
		var err error
		src, err = os.ReadFile(file)
		require.NoError(t, err)
	}
	g, err := planner.Load(t.Context(), file, src, params, planner.Options{})
	require.NoError(t, err)
	return g
}

const oneSend = `plan one
param ranks = 2
param n = 100
buffer a u8[n]
queue q to 1 - rank peer q
if rank == 0 { op s = send q a }
if rank == 1 { op r = recv q a }
`

func TestParseFatTree(t *testing.T) {
	tr, err := ParseFatTree("2;32,32;1,32;1,1")
	require.NoError(t, err)
	assert.Equal(t, 1024, tr.Hosts())
	assert.Equal(t, "2;32,32;1,32;1,1", tr.String())
	for _, c := range []struct{ spec, want string }{
		{"2;32,32;1,32", "four parts"},
		{"x;1;1;1", `levels "x"`},
		{"0;;;", "levels"},
		{"2;32;1,32;1,1", "down counts \"32\": want 2 numbers"},
		{"2;32,0;1,32;1,1", `down count "0"`},
		{"2;32,32;1,a;1,1", `up count "a"`},
		{"3;256,256,256;1,1,1;1,1,1", "hosts: at most"},
	} {
		_, err := ParseFatTree(c.spec)
		if assert.Error(t, err, c.spec) {
			assert.Contains(t, err.Error(), c.want, c.spec)
		}
	}
}

func TestAutoFatTree(t *testing.T) {
	for _, r := range []int{1, 2, 3, 8, 255, 256, 1000, 1024, 4096, 16384} {
		tr := AutoFatTree(r)
		assert.GreaterOrEqual(t, tr.Hosts(), r)
		assert.Less(t, tr.Hosts(), 2*r+2, "not much larger than the ranks: %d", r)
		back, err := ParseFatTree(tr.String())
		require.NoError(t, err)
		assert.Equal(t, tr, back)
	}
	assert.Equal(t, "2;64,64;1,64;1,1", AutoFatTree(4096).String())
}

func TestPlatformXML(t *testing.T) {
	par := predict.Params{L: 1000, B: 0.08}
	p := PlatformFor(AutoFatTree(16), par, 0)
	assert.InDelta(t, 12.5e9, p.LinkBps, 1)
	assert.InDelta(t, 250e-9, p.LinkLatency, 1e-15)
	x := string(p.XML())
	assert.Contains(t, x, `radical="0-15"`)
	assert.Contains(t, x, `topo_parameters="2;4,4;1,4;1,1"`)
	assert.Contains(t, x, `bw="12500000000Bps"`)
	assert.Contains(t, x, `lat="2.5e-07s"`)
	// the bytes missing the caches slow the links as they slow predict's G
	assert.InDelta(t, 1e9/(0.08+0.5*0.4), PlatformFor(AutoFatTree(16), predict.Params{B: 0.08, Mem: 0.4}, 0.5).LinkBps, 1)
}

// One message: an exec of o on the sender, the comm, an exec of o on the receiver.
func TestBuildOneSend(t *testing.T) {
	g := load(t, "one.dag", []byte(oneSend), nil)
	s, err := Build(g, predict.Params{O: 7, Host: 3, Reduce: 1})
	require.NoError(t, err)
	var b bytes.Buffer
	_, err = s.WriteTo(&b)
	require.NoError(t, err)
	assert.Equal(t, "coredag-simgrid-schedule 1\nhosts 2\nacts 3\ne 0 7\nc 0 1 100\ne 1 7\ndeps 2\n0 1\n1 2\n", b.String())
	assert.Equal(t, "s on rank 0", s.OpOf(1))
	assert.Equal(t, "r on rank 1", s.OpOf(2))
	assert.Equal(t, "", s.OpOf(3))
}

// Every plan of the library becomes a schedule whose comms are its messages and whose
// dependencies name activities that exist.
func TestBuildPlans(t *testing.T) {
	files, err := filepath.Glob("../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		g := load(t, f, nil, map[string]int64{"ranks": 4})
		s, err := Build(g, predict.Default())
		require.NoError(t, err, f)
		comms, want := 0, 0
		for _, a := range s.acts {
			if a.comm {
				comms++
				assert.NotEqual(t, -1, a.dst)
			}
			assert.Less(t, int(a.src), g.Ranks, f)
			assert.GreaterOrEqual(t, a.amount, 0.0, f)
		}
		for i := range g.Ops {
			switch k := g.Ops[i].Kind; {
			case k == ir.OpSend || k == ir.OpWrite:
				want++
			case k == ir.OpRead || k.IsAtomic():
				want += 2
			}
		}
		assert.Equal(t, want, comms, f)
		for _, d := range s.deps {
			assert.NotEqual(t, d[0], d[1], f)
			assert.Less(t, int(d[0]), len(s.acts), f)
			assert.Less(t, int(d[1]), len(s.acts), f)
		}
	}
}

// simgridOrSkip skips a test that runs SimGrid outside CI and COREDAG_E2E (building the engine
// takes a while), and under them fails when SimGrid is missing.
func simgridOrSkip(t *testing.T) {
	t.Helper()
	if !e2e.Enabled() {
		t.Skip("runs SimGrid: set COREDAG_E2E=1 (CI does)")
	}
	if _, err := Engine(context.Background(), Options{}); err != nil {
		t.Fatalf("SimGrid's engine: %v", err)
	}
}

// One message on SimGrid takes what the platform says: o, the latency of the two links under
// one leaf switch, the bytes over the bandwidth, o.
func TestRunOneSend(t *testing.T) {
	simgridOrSkip(t)
	g := load(t, "one.dag", []byte(oneSend), nil)
	par := predict.Params{L: 1000, O: 100, B: 1}
	s, err := Build(g, par)
	require.NoError(t, err)
	res, err := Run(context.Background(), s, PlatformFor(AutoFatTree(2), par, 0), Options{Timeout: time.Minute})
	require.NoError(t, err)
	assert.InDelta(t, 100+2*250+100+100, res.Time, 1)
	assert.Equal(t, "r on rank 1", res.Last)
	assert.Equal(t, 3, res.Activities)
}

func TestRunErrors(t *testing.T) {
	simgridOrSkip(t)
	g := load(t, "one.dag", []byte(oneSend), nil)
	s, err := Build(g, predict.Default())
	require.NoError(t, err)
	_, err = Run(context.Background(), s, PlatformFor(FatTree{Levels: 1, Down: []int{1}, Up: []int{1}, Links: []int{1}}, predict.Default(), 0), Options{})
	require.ErrorContains(t, err, "has 1 hosts, and the plan 2 ranks")
	_, err = Run(context.Background(), s, Platform{Tree: AutoFatTree(2), LinkBps: math.Inf(1), LinkLatency: 1e-6}, Options{})
	require.ErrorContains(t, err, "link bandwidth +Inf bytes/s: must be a finite number > 0")
	// a platform SimGrid refuses is an error that says so, not a crash or a hang
	bin, err := Engine(context.Background(), Options{})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.xml"), []byte("<platform version=\"4.1\"><nonsense/></platform>\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "s.txt"), []byte("coredag-simgrid-schedule 1\nhosts 1\nacts 0\ndeps 0\n"), 0o644))
	cmd := exec.Command(bin, filepath.Join(dir, "p.xml"), filepath.Join(dir, "s.txt"))
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, 2, cmd.ProcessState.ExitCode(), "%s", out)
	assert.Contains(t, string(out), "coredag-simgrid: platform "+filepath.Join(dir, "p.xml"))
	// a cycle is reported, not waited for
	cyc := &Schedule{Ranks: 1, g: g, acts: []activity{{amount: 1}, {amount: 1}}, op: []ir.OpID{0, 0}, deps: [][2]int32{{0, 1}, {1, 0}}}
	_, err = Run(context.Background(), cyc, PlatformFor(AutoFatTree(1), predict.Default(), 0), Options{Timeout: time.Minute})
	require.ErrorContains(t, err, "2 of 2 activities never ran")
	// no compiler: the error says what to install
	_, err = Engine(context.Background(), Options{CXX: "no-such-compiler-for-coredag", CacheDir: t.TempDir()})
	require.True(t, errors.Is(err, ErrNoSimGrid), "%v", err)
	assert.True(t, strings.Contains(err.Error(), "apt-get install g++ libsimgrid-dev"), "%v", err)
}

// Where no two messages share a link and every path has the same latency (one host per leaf
// switch), SimGrid's time is predict's on the polling engine without its posting and polling
// figures: the two models agree where they should, and differ by what SimGrid adds (contention,
// shorter paths under one switch) elsewhere.
func TestRunAgreesWithPredict(t *testing.T) {
	simgridOrSkip(t)
	par := predict.Params{L: 1000, O: 100, B: 0.1, Host: 50, Reduce: 0.2, Copy: 0.1}
	tg, err := ir.LookupTarget("generic")
	require.NoError(t, err)
	for _, f := range []string{"ring_allreduce", "recursive_doubling_allreduce", "rabenseifner_allreduce"} {
		g := load(t, "../plans/"+f+".dag", nil, map[string]int64{"ranks": 8})
		s, err := Build(g, par)
		require.NoError(t, err)
		res, err := Run(context.Background(), s, PlatformFor(FatTree{Levels: 2, Down: []int{1, 8}, Up: []int{1, 1}, Links: []int{1, 1}}, par, 0), Options{Timeout: time.Minute})
		require.NoError(t, err, f)
		plan, err := planner.Compile(t.Context(), g, tg)
		require.NoError(t, err)
		want, err := predict.Simulate(t.Context(), plan, par, predict.Options{})
		require.NoError(t, err)
		assert.InEpsilon(t, want.Time, res.Time, 0.005, "%s: SimGrid %v ns, predict %v ns", f, res.Time, want.Time)
		assert.Greater(t, res.CPU, time.Duration(0))
		assert.Greater(t, res.MaxRSS, int64(0))
	}
}

// A wait comes after the landings every way of completing it includes: each of the plan's Lands
// edges is a dependency from the write's comm to the wait's exec.
func TestBuildWaits(t *testing.T) {
	g := load(t, "../docs/examples/counted_allgather.dag", nil, map[string]int64{"ranks": 4})
	require.NotEmpty(t, g.Lands)
	s, err := Build(g, predict.Default())
	require.NoError(t, err)
	has := map[[2]ir.OpID]bool{}
	for _, d := range s.deps {
		if s.acts[d[0]].comm && !s.acts[d[1]].comm {
			has[[2]ir.OpID{s.op[d[0]], s.op[d[1]]}] = true
		}
	}
	for _, e := range g.Lands {
		require.Equal(t, ir.OpWait, g.Ops[e.To].Kind)
		assert.True(t, has[[2]ir.OpID{e.From, e.To}], "the wait %s comes after the landing of %s", g.OpString(e.To), g.OpString(e.From))
	}
}
