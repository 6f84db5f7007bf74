package predict

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
)

func compile(t testing.TB, file string, src []byte, params map[string]int64, target string) *ir.Plan {
	t.Helper()
	g, err := planner.Load(t.Context(), file, src, params, planner.Options{})
	require.NoError(t, err)
	tg, err := ir.LookupTarget(target)
	require.NoError(t, err)
	p, err := planner.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	return p
}

func compileFile(t testing.TB, file string, params map[string]int64, target string) *ir.Plan {
	t.Helper()
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	return compile(t, file, src, params, target)
}

// unit sets one figure to 1 and the others to 0.
func unit(name string) Params {
	var p Params
	for _, f := range p.fields() {
		if f.name == name {
			*f.v = 1
		}
	}
	return p
}

const oneSend = `plan one
param ranks = 2
param n = 100
buffer a u8[n]
queue q to 1 - rank peer q
if rank == 0 { op s = send q a }
if rank == 1 { op r = recv q a }
`

// A single message: under each figure alone, the time is what LogGP says.
func TestOneMessage(t *testing.T) {
	for _, target := range []string{"generic", "connectx", "connectx-inline", "triggered"} {
		p := compile(t, "one.dag", []byte(oneSend), nil, target)
		for _, c := range []struct {
			fig  string
			want float64
		}{
			{"L_ns", 1},               // one wire latency
			{"o_ns", 2},               // sender and receiver NIC
			{"G_ns_per_byte", 100},    // 100 bytes
			{"reduce_ns_per_byte", 0}, // no host step
		} {
			res, err := Simulate(t.Context(), p, unit(c.fig), Options{})
			require.NoError(t, err, target)
			require.InDelta(t, c.want, res.Time, 1e-9, "%s under %s alone", target, c.fig)
		}
	}
}

const oneWriteImm = `plan onew
param ranks = 2
param n = 100
buffer a u8[n] remote_write
queue q to 1 - rank peer q
if rank == 0 { op w = write q a to a notify }
if rank == 1 { op r = recv q }
`

// With polled CQs (cq_ns) and a thread per rank, a message waits half a round of its rank's CQ
// polls at each end, and its sender's completion half a round of the sender's more for the
// acknowledgement; with one shared worker the thread's rounds over every rank's CQs are
// simulated. A write with immediate costs imm_ns more at its sender.
func TestPolledCQs(t *testing.T) {
	for _, target := range []string{"generic", "connectx", "triggered-sockets"} {
		for _, src := range []string{oneSend, oneWriteImm} {
			p := compile(t, "one.dag", []byte(src), nil, target)
			n0, n1 := float64(len(p.Ranks[0].CQs)), float64(len(p.Ranks[1].CQs))
			require.Positive(t, n0+n1)
			par := unit("cq_ns")
			res, err := Simulate(t.Context(), p, par, Options{})
			require.NoError(t, err, target)
			require.InDelta(t, (n0+n1)/2+n0/2, res.Time, 1e-9, "%s: a message, half a round at each end, and its acknowledgement, half of the sender's", target)
			par.Workers = 1
			res, err = Simulate(t.Context(), p, par, Options{})
			require.NoError(t, err, target)
			if target == "triggered-sockets" {
				// one thread polls rank 0's send and receive CQs, then rank 1's, 1 ns each: it
				// sends at its first poll (t = 1), receives and acknowledges at rank 1's receive
				// CQ (4), and rank 0 reads the acknowledgement at its next poll of its send CQ (5)
				require.InDelta(t, 5, res.Time, 1e-9, "%s, shared worker", target)
			} else {
				require.Greater(t, res.Time, n0+n1, "%s, shared worker: at least a round", target)
				require.LessOrEqual(t, res.Time, 3*(n0+n1), "%s, shared worker: at most three rounds", target)
			}
			res, err = Simulate(t.Context(), p, unit("imm_ns"), Options{})
			require.NoError(t, err, target)
			want := 0.0
			if src == oneWriteImm {
				want = 1
			}
			require.InDelta(t, want, res.Time, 1e-9, "%s under imm_ns alone", target)
		}
	}
}

// Every plan of the library simulates on every target without stalling, and its time grows with
// the wire latency.
func TestPlansAllTargets(t *testing.T) {
	files, err := filepath.Glob("../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		for _, target := range []string{"generic", "connectx", "connectx-inline", "triggered", "triggered-sockets", "unordered"} {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			g, err := planner.Load(t.Context(), f, src, nil, planner.Options{})
			require.NoError(t, err, f)
			tg, err := ir.LookupTarget(target)
			require.NoError(t, err)
			p, err := planner.Compile(t.Context(), g, tg)
			if err != nil {
				continue // a plan the target refuses (limits)
			}
			a, err := Simulate(t.Context(), p, Default(), Options{})
			require.NoError(t, err, "%s on %s", f, target)
			par := Default()
			par.L *= 2
			b, err := Simulate(t.Context(), p, par, Options{})
			require.NoError(t, err, "%s on %s", f, target)
			require.Greater(t, a.Time, 0.0, "%s on %s", f, target)
			require.Greater(t, b.Time, a.Time, "%s on %s: doubling L", f, target)
			require.NotEmpty(t, a.Last)
		}
	}
}

// With one shared worker every piece of work is serialised: the time is at least the sum of all
// CPU and NIC work.
func TestSharedWorker(t *testing.T) {
	p := compileFile(t, "../plans/ring_allreduce.dag", map[string]int64{"ranks": 4}, "connectx")
	par := Default()
	par.L = 0
	par.Workers = 1
	res, err := Simulate(t.Context(), p, par, Options{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, res.Time+1e-6, res.CPUBusy+res.NICBusy)
	par.Workers = 0
	own, err := Simulate(t.Context(), p, par, Options{})
	require.NoError(t, err)
	require.Less(t, own.Time, res.Time)
}

// Ring allreduce: the time of a large message is close to the bandwidth term 2(p-1)/p * bytes * G.
func TestRingBandwidth(t *testing.T) {
	const ranks, n = 8, 1 << 16 // f32 elements per chunk
	for _, target := range []string{"generic", "connectx", "triggered"} {
		p := compileFile(t, "../plans/ring_allreduce.dag", map[string]int64{"ranks": ranks, "n": n}, target)
		res, err := Simulate(t.Context(), p, unit("G_ns_per_byte"), Options{})
		require.NoError(t, err)
		want := 2 * float64(ranks-1) * n * 4 // every step sends one chunk of 4n bytes
		require.InDelta(t, want, res.Time, want*1e-9, target)
	}
}

func TestBadParams(t *testing.T) {
	p := compile(t, "one.dag", []byte(oneSend), nil, "generic")
	par := Default()
	par.L = math.NaN()
	_, err := Simulate(t.Context(), p, par, Options{})
	require.ErrorContains(t, err, "L_ns")
	_, err = ParseParams("x.json", []byte("{\n  \"L_ns\": -1\n}"))
	require.ErrorContains(t, err, "x.json: L_ns is -1")
	_, err = ParseParams("x.json", []byte("{\n  \"L_ns\": 1e308\n}")) // finite, but sums overflow
	require.ErrorContains(t, err, "x.json: L_ns is 1e+308: every figure must be a number from 0 to 1e+15")
	_, err = ParseParams("x.json", []byte("{\n  \"L_ns\": 1,\n  \"bogus\": 2\n}"))
	require.ErrorContains(t, err, "bogus")
	_, err = ParseParams("x.json", []byte("{\n  \"L_ns\": 1,,\n}"))
	require.ErrorContains(t, err, "x.json:2:")
	q, err := ParseParams("x.json", Default().Encode())
	require.NoError(t, err)
	require.Equal(t, Default(), q)
	_, err = ReadParams("/dev/zero") // never ends: refused after 1 MiB
	require.ErrorContains(t, err, "/dev/zero: larger than 1 MiB")
}

// BenchmarkRingAllreduce simulates the ring allreduce at 64 and 256 ranks (about 5 ranks² ops):
// the time per op (ns/op divided by ops) says how far the model scales.
func BenchmarkRingAllreduce(b *testing.B) {
	for _, ranks := range []int64{64, 256} {
		b.Run(fmt.Sprint(ranks), func(b *testing.B) {
			p := compileFile(b, "../plans/ring_allreduce.dag", map[string]int64{"ranks": ranks, "n": 1}, "connectx")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := Simulate(b.Context(), p, Default(), Options{Scale: 1024}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(p.Graph.Ops)), "ops")
		})
	}
}

const waitCopy = `plan waitcopy
param ranks = 2
param n = 100
buffer src  u64[n] init i
buffer dst  u64[n] remote_write
buffer out  u64[n]
buffer flag u64[1] remote_atomic
queue q to 1 - rank peer q
if rank == 1 {
  op put  = write q src to dst
  op bump = atomic add q flag[0] 1 after put
}
if rank == 0 {
  op got = wait flag[0] >= 1
  op cp  = copy dst to out after got
}
`

// A wait starts its host step when the landings it needs are in (Graph.Lands), not when its
// own rank reaches it: the copy after it starts once the write (8n bytes) and the add (8 bytes)
// have landed, on every engine the targets lower waits to.
func TestWaitHoldsForLandings(t *testing.T) {
	par := unit("G_ns_per_byte")
	par.Copy = 1
	for _, target := range []string{"generic", "connectx", "triggered"} {
		p := compile(t, "waitcopy.dag", []byte(waitCopy), nil, target)
		require.NotEmpty(t, p.Graph.Lands, target)
		res, err := Simulate(t.Context(), p, par, Options{})
		require.NoError(t, err, target)
		require.InDelta(t, 8*100+8+8*100, res.Time, 1e-9, target)
	}
}

// On a triggered target a write after a wait for landed writes fires on the region's
// remote-write counter as the write before it lands, not after the wait's host step: in the
// chain of testdata/onesided/counted_chain.dag under host steps alone (host_ns 1, the rest 0)
// every rank's CPU runs its waits and its copy in parallel with the others', so an iteration
// takes as long at 6 ranks as at 3; on connectx, whose forwarding waits for each hop's host
// step, it takes one host step more per hop.
func TestTriggeredLandCounter(t *testing.T) {
	at := func(target string, ranks int64) float64 {
		p := compileFile(t, "../testdata/onesided/counted_chain.dag", map[string]int64{"ranks": ranks, "c": 2, "n": 4}, target)
		res, err := Simulate(t.Context(), p, unit("host_ns"), Options{})
		require.NoError(t, err)
		require.Positive(t, res.Time)
		return res.Time
	}
	require.InDelta(t, at("triggered", 3), at("triggered", 6), 1e-9)
	require.InDelta(t, at("connectx", 3)+3, at("connectx", 6), 1e-9)
}
