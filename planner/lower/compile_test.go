package lower_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/listing"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/compile")

func load(t testing.TB, path string, params map[string]int64) *ir.Graph {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	name := strings.TrimPrefix(path, "../../")
	g, err := planner.Load(t.Context(), name, src, params, planner.Options{})
	require.NoError(t, err, path)
	return g
}

func compileFor(t testing.TB, g *ir.Graph, target string) *ir.Plan {
	t.Helper()
	tg, err := ir.LookupTarget(target)
	require.NoError(t, err)
	p, err := lower.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	return p
}

// listingOrError is what a golden file holds: the listing, or the diagnostics Compile gave.
func listingOrError(g *ir.Graph, tg ir.Target) string {
	p, err := lower.Compile(context.Background(), g, tg)
	var b bytes.Buffer
	if err != nil {
		diag.Print(&b, err, nil)
		return "compile error:\n" + b.String()
	}
	if err := listing.Write(&b, p, listing.Options{}); err != nil {
		return "listing error: " + err.Error()
	}
	return b.String()
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file (run go test ./planner -run Golden -update)")
	assert.Equal(t, string(want), got, "%s differs (rerun with -update if the change is intended)", path)
}

// TestGoldenListings compiles every plan in plans/ on every target for ranks 2 and 4.
func TestGoldenListings(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	files = append(files, "../../testdata/compile/exchange.dag")
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".dag")
		rankList := []int64{2, 4}
		if base == "exchange" {
			rankList = []int64{2} // its queue pairs rank r with r+1 both ways: two ranks only
		}
		for _, ranks := range rankList {
			g := load(t, f, map[string]int64{"ranks": ranks})
			for _, tg := range ir.Targets() {
				if tg.Name == "unordered" {
					continue // lowered as generic is: only the checks' ordering differs
				}
				name := fmt.Sprintf("%s.r%d.%s.txt", base, ranks, tg.Name)
				t.Run(name, func(t *testing.T) {
					golden(t, filepath.Join("../../testdata/compile", name), listingOrError(g, tg))
				})
			}
		}
	}
}

func TestGoldenJSON(t *testing.T) {
	t.Parallel()
	g := load(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 4})
	for _, target := range []string{"connectx", "connectx-inline", "generic"} {
		p := compileFor(t, g, target)
		var b bytes.Buffer
		require.NoError(t, listing.WriteJSON(&b, p, listing.Options{}))
		golden(t, fmt.Sprintf("../../testdata/compile/ring_allreduce.r4.%s.json", target), b.String())
	}
}

// Every WQE object of the JSON form names its opcode with one of the documented names.
func TestJSONOpcodes(t *testing.T) {
	t.Parallel()
	g := load(t, "../../testdata/compile/exchange.dag", nil)
	known := map[string]bool{}
	for _, n := range []string{"SEND", "RECV", "RDMA_WRITE", "RDMA_WRITE_IMM", "RDMA_READ", "ATOMIC_FADD",
		"ATOMIC_CAS", "NOP", "CQE_WAIT", "SEND_EN", "RECV_EN", "HOST"} {
		known[n] = true
		o, ok := ir.ParseOpcode(n)
		require.True(t, ok)
		assert.Equal(t, n, o.String())
	}
	seen := map[string]bool{}
	for _, tg := range ir.Targets() {
		if tg.Trigger != nil && tg.Trigger.RecvThresholdZero {
			continue // refuses held-back receives (trigger_test.go)
		}
		var b bytes.Buffer
		require.NoError(t, listing.WriteJSON(&b, compileFor(t, g, tg.Name), listing.Options{}))
		var doc struct {
			Ranks []struct {
				Queues []struct {
					WQEs []map[string]any `json:"wqes"`
				} `json:"queues"`
			} `json:"ranks"`
		}
		require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
		for _, r := range doc.Ranks {
			for _, q := range r.Queues {
				for _, w := range q.WQEs {
					opc, ok := w["opcode"].(string)
					require.True(t, ok, "WQE without opcode: %v", w)
					assert.True(t, known[opc], "unknown opcode %q", opc)
					seen[opc] = true
				}
			}
		}
	}
	for _, n := range []string{"SEND", "RECV", "CQE_WAIT", "SEND_EN", "RECV_EN", "HOST", "NOP"} {
		assert.True(t, seen[n], "exchange should produce %s", n)
	}
}

type shape struct {
	queue string
	ops   []string // opcode[:flags]
}

func chainShape(p *ir.Plan, rank int, queue string) []string {
	for _, q := range p.Ranks[rank].Queues {
		if q.Name != queue {
			continue
		}
		var out []string
		for _, e := range q.Chain {
			s := e.Opcode.String()
			if e.Signalled() {
				s += "!"
			}
			switch e.Opcode {
			case ir.OpcWait:
				s += fmt.Sprintf(" %s>=%d", p.Ranks[rank].CQs[e.Wait.CQ].Name, e.Wait.Count)
			case ir.OpcSendEnable, ir.OpcRecvEnable:
				s += fmt.Sprintf(" %s<%d", p.Ranks[rank].Queues[e.Queue].Name, e.UpTo)
			}
			out = append(out, s)
		}
		return out
	}
	return nil
}

// The exchange plan of LOWERING.md (with the WAR edge red after tx the race checker requires).
func TestExchangeLowering(t *testing.T) {
	t.Parallel()
	g := load(t, "../../testdata/compile/exchange.dag", nil)
	cases := []struct {
		target string
		want   []shape
		waits  [2]int // naive, after
	}{
		{"connectx", []shape{
			{"mgmt", []string{"SEND_EN q.sq<1", "RECV_EN q.rq<1", "CQE_WAIT host.cq>=1", "SEND_EN q.sq<2", "RECV_EN! q.rq<2"}},
			{"q.sq", []string{"SEND!", "SEND!"}}, // tx is signalled: red waits for it (WAR)
			{"q.rq", []string{"RECV!", "RECV!"}},
			{"host", []string{"HOST", "NOP!"}},
		}, [2]int{4, 2}},
		{"connectx-inline", []shape{
			// LOWERING.md's chain: each RECV_EN comes before the SEND that needs the peer's
			// receive, so no RECV_EN waits behind a send the peer cannot accept yet.
			{"q.sq", []string{"RECV_EN q.rq<1", "SEND!", "CQE_WAIT host.cq>=1", "RECV_EN q.rq<2", "SEND!"}},
			{"q.rq", []string{"RECV!", "RECV!"}},
		}, [2]int{4, 2}},
		{"generic", []shape{
			{"q.sq", []string{"SEND!", "SEND!"}},
			{"q.rq", []string{"RECV!", "RECV!"}},
			{"host", []string{"HOST"}},
		}, [2]int{4, 0}},
	}
	for _, c := range cases {
		t.Run(c.target, func(t *testing.T) {
			p := compileFor(t, g, c.target)
			for _, s := range c.want {
				assert.Equal(t, s.ops, chainShape(p, 0, s.queue), "queue %s", s.queue)
			}
			assert.Equal(t, c.waits[0], p.Stats.NaiveWaits)
			assert.Equal(t, c.waits[1], p.Stats.Waits)
			assert.Equal(t, 3, p.Stats.CriticalPath)
			host := p.WQEOf(2) // red on rank 0
			assert.Equal(t, ir.OpcHost, host.Opcode)
			if c.target != "generic" {
				require.Len(t, host.Waits, 2, "red waits for rx and tx")
			}
		})
	}
}

// Without the WAR edge of tx, the managed lowering is exactly LOWERING.md's: tx unsignalled.
func TestSelectiveSignalling(t *testing.T) {
	t.Parallel()
	src := `plan s
param ranks = 2
buffer a f32[4]
buffer t f32[4]
buffer u f32[4]
queue q to (rank + 1) % ranks
op tx  = send q a
op rx  = recv q t
op red = reduce sum u from t after rx
op tx2 = send q u after red
op rx2 = recv q t after red
`
	g, err := planner.Load(t.Context(), "s.dag", []byte(src), nil, planner.Options{})
	require.NoError(t, err)
	p := compileFor(t, g, "connectx")
	assert.Equal(t, []string{"SEND", "SEND!"}, chainShape(p, 0, "q.sq"), "tx is signalled only if waited on")
}

func TestFenceAfterRead(t *testing.T) {
	t.Parallel()
	src := `plan f
param ranks = 2
buffer a u64[4] remote_read
buffer b u64[4]
queue q to (rank + 1) % ranks
op rd = read q a to b
op tx = send q b after rd
op rx = recv q a[0:4]
rx after rd
`
	g, err := planner.Load(t.Context(), "f.dag", []byte(src), nil, planner.Options{})
	require.NoError(t, err)
	for _, tg := range ir.Targets() {
		if tg.Trigger != nil && tg.Trigger.RecvThresholdZero {
			continue // refuses held-back receives (trigger_test.go)
		}
		p := compileFor(t, g, tg.Name)
		e := p.WQEOf(1)
		assert.Equal(t, ir.OpcSend, e.Opcode)
		if e.Flags&ir.Fence != 0 {
			continue
		}
		// connectx-inline enables rx (after rd) from q.sq before tx: the WAIT for rd placed
		// there already holds tx back until rd completed, so no fence is needed.
		l := p.Loc[1]
		waited := false
		for _, w := range p.Ranks[0].Queues[l.Queue].Chain[:l.Index] {
			waited = waited || w.Opcode == ir.OpcWait && w.Wait.Op == 0
		}
		assert.True(t, waited, "%s: a send after a read on its queue is fenced or waits for the read", tg.Name)
	}
}

func TestDepthLimits(t *testing.T) {
	t.Parallel()
	// A ring whose queues keep the default depth (128): 142 messages per queue do not fit.
	src := `plan d
param ranks = 72
buffer src u64[2 * ranks]
buffer dst u64[2 * ranks]
queue right to (rank + 1) % ranks peer left
queue left  to (rank - 1) % ranks peer right
for s in 0 .. 2 * ranks - 2 {
  op tx[s] = send right src[s : s + 1]
  op rx[s] = recv left dst[s : s + 1]
}
`
	g, err := planner.Load(t.Context(), "d.dag", []byte(src), nil, planner.Options{})
	require.NoError(t, err)
	tg, _ := ir.LookupTarget("connectx")
	_, err = lower.Compile(t.Context(), g, tg)
	require.Error(t, err)
	var list diag.List
	require.ErrorAs(t, err, &list)
	assert.Contains(t, list[0].Msg, "depth is 128")
	assert.Contains(t, list[0].Msg, "declare `depth 142`")
	assert.True(t, list[0].Pos.IsValid(), "the error points at the queue declaration")
	// The depth named is the least that works: one less is refused, it compiles.
	for depth, ok := range map[string]bool{"depth 141": false, "depth 142": true} {
		d := strings.NewReplacer("peer left\n", "peer left "+depth+"\n", "peer right\n", "peer right "+depth+"\n").Replace(src)
		gd, err := planner.Load(t.Context(), "d.dag", []byte(d), nil, planner.Options{})
		require.NoError(t, err, depth)
		_, err = lower.Compile(t.Context(), gd, tg)
		assert.Equal(t, ok, err == nil, "%s: %v", depth, err)
	}
	gen, _ := ir.LookupTarget("generic")
	_, err = lower.Compile(t.Context(), g, gen)
	assert.NoError(t, err, "the polling engine refills as slots free")
}

// TestSGELimit: a list longer than a target's SGEs per work request is refused by that target,
// at the first slice past its limit, with both figures; a target with room compiles it.
func TestSGELimit(t *testing.T) {
	t.Parallel()
	src := `plan s
param ranks = 2
buffer a u64[64]
queue q to 1 - rank
op tx = send q {a[2 * j] for j in 0 .. 9}
op rx = recv q a[32:41]
`
	g, err := planner.Load(t.Context(), "s.dag", []byte(src), nil, planner.Options{})
	require.NoError(t, err)
	require.Len(t, g.Ops[0].More(), 8, "nine slices, none adjacent")
	sockets, _ := ir.LookupTarget("triggered-sockets")
	_, err = lower.Compile(t.Context(), g, sockets)
	require.Error(t, err)
	var list diag.List
	require.ErrorAs(t, err, &list)
	assert.Equal(t, diag.Target, list[0].Code)
	assert.Equal(t, "s.dag:5:17", list[0].Pos.String())
	assert.Contains(t, list[0].Msg, "tx has a scatter/gather list of 9 slices, above the 8 SGEs per work request of target triggered-sockets")
	cx, _ := ir.LookupTarget("connectx")
	_, err = lower.Compile(t.Context(), g, cx)
	assert.NoError(t, err)
}

func TestInlineLimit(t *testing.T) {
	t.Parallel()
	src := `plan i
param ranks = 2
buffer a u8[512]
buffer b u8[512]
queue q to (rank + 1) % ranks
op tx = send q a inline
op rx = recv q b
`
	g, err := planner.Load(t.Context(), "i.dag", []byte(src), nil, planner.Options{})
	require.NoError(t, err)
	for _, tg := range ir.Targets() {
		if tg.Trigger != nil && tg.Trigger.RecvThresholdZero {
			continue // refuses held-back receives (trigger_test.go)
		}
		_, err := lower.Compile(t.Context(), g, tg)
		require.Error(t, err, tg.Name)
		assert.Contains(t, err.Error(), "i.dag:6:")
		assert.NotContains(t, err.Error(), "more errors", "one error per statement, not per rank")
		assert.Contains(t, err.Error(), "drop `inline`")
	}
}

// TestAutoInline: where WQEs are posted only once their inputs are complete (generic), small
// sends and writes go inline without the plan saying so; pre-posted chains inline only what the
// plan marks, since their payload is not final when they are posted.
func TestAutoInline(t *testing.T) {
	t.Parallel()
	src := `plan i
param ranks = 2
buffer a u64[16]
buffer b u64[16] remote_write
buffer c u64[16] remote_write
buffer d u64[16] remote_read
op small = write q a[0:1] to b[0:1] notify
op big   = write q a to c notify
op g0    = recv q
op g1    = recv q
op tx    = send q a[0:2]
op rx    = recv q b[2:4]
op rd    = read q d[0:1] to b[8:9]
queue q to (rank + 1) % ranks
`
	g, err := planner.Load(t.Context(), "i.dag", []byte(src), nil, planner.Options{})
	require.NoError(t, err)
	inline := func(p *ir.Plan, name string) bool {
		for i := range g.Ops {
			if g.Ops[i].Name == name && g.Ops[i].Rank == 0 {
				return p.WQEOf(ir.OpID(i)).Flags&ir.Inline != 0
			}
		}
		t.Fatalf("no op %s", name)
		return false
	}
	p := compileFor(t, g, "generic")
	assert.True(t, inline(p, "small"), "8-byte write")
	assert.True(t, inline(p, "tx"), "16-byte send")
	assert.False(t, inline(p, "big"), "128 bytes is above generic's 64-byte limit")
	assert.False(t, inline(p, "rd"), "reads carry no payload")
	for _, tg := range []string{"connectx", "connectx-inline"} {
		p := compileFor(t, g, tg)
		assert.False(t, inline(p, "small"), tg)
		assert.False(t, inline(p, "tx"), tg)
	}
}

func TestTargets(t *testing.T) {
	t.Parallel()
	names := []string{}
	for _, tg := range ir.Targets() {
		names = append(names, tg.Name)
		assert.NotEmpty(t, tg.Description)
		assert.Equal(t, tg.Style != ir.StyleNone, tg.CrossChannel)
	}
	assert.Equal(t, []string{"connectx", "connectx-inline", "generic", "triggered", "triggered-cxi", "triggered-sockets", "unordered"}, names)
	_, err := ir.LookupTarget("bluefield")
	assert.ErrorContains(t, err, "known targets: connectx, connectx-inline, generic, triggered")
}

// ringWithDepth is the ring allreduce of plans/, whose queues are deep enough to pre-post a whole
// iteration at any size (their depth grows with ranks).
func ringWithDepth(t testing.TB) []byte {
	src, err := os.ReadFile("../../plans/ring_allreduce.dag")
	require.NoError(t, err)
	require.Contains(t, string(src), "4 * ranks)")
	return src
}

func BenchmarkCompile(b *testing.B) {
	src := ringWithDepth(b)
	tg, _ := ir.LookupTarget("connectx")
	for _, ranks := range []int64{64, 128, 256} {
		b.Run(fmt.Sprintf("ring_allreduce/ranks=%d", ranks), func(b *testing.B) {
			g, err := planner.Load(b.Context(), "ring_allreduce.dag", src, map[string]int64{"ranks": ranks, "n": 16}, planner.Options{})
			require.NoError(b, err)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := lower.Compile(b.Context(), g, tg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(g.Ops)), "ns/op-in-graph")
			b.ReportMetric(float64(len(g.Ops)), "graph-ops")
		})
	}
}

// TestDeps: a plan for the generic target carries what the polling engine walks (every op's
// explicit predecessors and successors, as the Graph has them) and lists each queue side's ops
// in queue order in its chains; cross-channel plans carry no Deps.
func TestDeps(t *testing.T) {
	t.Parallel()
	matches, err := filepath.Glob("../../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, matches)
	for _, path := range matches {
		g := load(t, path, nil)
		p := compileFor(t, g, "generic")
		require.NotNil(t, p.Deps, path)
		for o := range g.Ops {
			id := ir.OpID(o)
			assert.Equal(t, g.Preds(id), p.Deps.Preds(id), "%s: preds of %s", path, g.OpString(id))
			assert.Equal(t, g.Succs(id), p.Deps.Succs(id), "%s: succs of %s", path, g.OpString(id))
			assert.Equal(t, int32(len(g.Preds(id))), p.Deps.NumPreds(id))
		}
		for r := range p.Ranks {
			rp := &p.Ranks[r]
			span := g.Rank[r]
			for i := range rp.SendWQ {
				q := &g.Queues[span.FirstQueue+ir.QueueID(i)]
				for _, side := range []struct {
					wq  int
					ops []ir.OpID
				}{{rp.SendWQ[i], q.SendOps}, {rp.RecvWQ[i], q.RecvOps}} {
					var got []ir.OpID
					for _, w := range rp.Queues[side.wq].Chain {
						got = append(got, w.Op)
					}
					assert.Equal(t, side.ops, got, "%s: rank %d queue %s", path, r, rp.Queues[side.wq].Name)
				}
			}
		}
		assert.Nil(t, compileFor(t, g, "connectx").Deps, path)
	}
}

// BenchmarkEventOrder is the global event order Compile walks (eventOrder), alone: a serial
// pass whose cost per op grows with the plan as its reads miss the caches.
func BenchmarkEventOrder(b *testing.B) {
	src := ringWithDepth(b)
	tg, _ := ir.LookupTarget("connectx")
	for _, ranks := range []int64{128, 256, 512} {
		b.Run(fmt.Sprintf("ring_allreduce/ranks=%d", ranks), func(b *testing.B) {
			g, err := planner.Load(b.Context(), "ring_allreduce.dag", src, map[string]int64{"ranks": ranks}, planner.Options{})
			require.NoError(b, err)
			for b.Loop() {
				if _, _, err := lower.EventOrder(g, tg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(g.Ops)), "ns/op-in-graph")
		})
	}
}
