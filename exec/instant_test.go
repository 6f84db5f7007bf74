package exec

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

// instantNIC is a fake Provider whose work requests complete the moment they are posted (no
// data moves): what is left to measure is the engine's own dispatch cost.
// instantNIC completes every request as it is posted; with dropRecv it never completes a
// receive, like a NIC whose peer never sends.
type instantNIC struct {
	next      uint32
	dropRecv  bool
	qpInlines []int // QPConfig.MaxInline of every QP created
	spins     int   // PollSpin calls
	// wait, if set, makes the NIC a nic.Blocker: its CQs block on it. With dropRecv and
	// wait.release, the dropped receives complete when the engine blocks.
	wait *instantWait
}

// instantWait is the wait set of an instantNIC: each Wait records its bound and either completes
// the receives the NIC held back (release: the completion a blocked engine must wake for) or
// sleeps the bound (nothing ever comes).
type instantWait struct {
	release bool
	held    []heldRecv
	calls   int
	longest time.Duration
}

type heldRecv struct {
	cq *instantCQ
	wc nic.WC
}

func (n *instantNIC) WaitSet(cqs []nic.CQ) nic.WaitSet {
	if n.wait == nil {
		return nil
	}
	return n.wait
}

func (w *instantWait) Wait(d time.Duration) (bool, error) {
	w.calls++
	w.longest = max(w.longest, d)
	if !w.release {
		time.Sleep(d)
		return true, nil
	}
	for _, h := range w.held {
		if err := h.cq.push(h.wc); err != nil {
			return true, err
		}
	}
	w.held = w.held[:0]
	return true, nil
}

func (n *instantNIC) Name() string { return "instant" }
func (n *instantNIC) Caps() nic.Caps {
	return nic.Caps{MaxInline: 256, MaxQPDepth: 1 << 16, MaxCQDepth: 1 << 16, Atomics: true, InProcess: true}
}
func (n *instantNIC) Open(rank int) (nic.Context, error) { return &instantCtx{nic: n, rank: rank}, nil }
func (n *instantNIC) Close() error                       { return nil }

type instantCtx struct {
	nic  *instantNIC
	rank int
}

func (c *instantCtx) Rank() int                { return c.rank }
func (c *instantCtx) AllocPD() (nic.PD, error) { return &instantPD{c: c}, nil }
func (c *instantCtx) Close() error             { return nil }
func (c *instantCtx) CreateCQ(d int) (nic.CQ, error) {
	c.nic.next++
	return &instantCQ{nic: c.nic, num: c.nic.next, ring: make([]nic.WC, d)}, nil
}

type instantPD struct{ c *instantCtx }

func (p *instantPD) AllocMR(size int, a nic.Access) (nic.MR, error) {
	p.c.nic.next++
	return &instantMR{b: alignedBytes(int64(size)), key: p.c.nic.next, a: a}, nil
}
func (p *instantPD) CreateQP(cfg nic.QPConfig) (nic.QP, error) {
	p.c.nic.next++
	p.c.nic.qpInlines = append(p.c.nic.qpInlines, cfg.MaxInline)
	return &instantQP{nic: p.c.nic, num: p.c.nic.next, rank: p.c.rank, s: cfg.SendCQ.(*instantCQ), r: cfg.RecvCQ.(*instantCQ), drop: p.c.nic.dropRecv}, nil
}
func (p *instantPD) RegisterMR(addr unsafe.Pointer, size int, a nic.Access) (nic.MR, error) {
	p.c.nic.next++
	return &instantMR{b: unsafe.Slice((*byte)(addr), size), key: p.c.nic.next, a: a}, nil
}
func (p *instantPD) Close() error { return nil }

type instantMR struct {
	b   []byte
	key uint32
	a   nic.Access
}

func (m *instantMR) Bytes() []byte      { return m.b }
func (m *instantMR) Addr() uint64       { return 0x1000 }
func (m *instantMR) LKey() uint32       { return m.key }
func (m *instantMR) RKey() uint32       { return m.key }
func (m *instantMR) Access() nic.Access { return m.a }
func (m *instantMR) Remote() nic.RemoteMR {
	return nic.RemoteMR{Addr: 0x1000, RKey: m.key, Len: uint64(len(m.b))}
}
func (m *instantMR) Close() error { return nil }

type instantCQ struct {
	nic        *instantNIC
	num        uint32
	ring       []nic.WC
	head, tail int // tail-head completions pending
}

func (q *instantCQ) Num() uint32 { return q.num }
func (q *instantCQ) Depth() int  { return len(q.ring) }
func (q *instantCQ) Close() error {
	return nil
}
func (q *instantCQ) push(wc nic.WC) error {
	if q.tail-q.head == len(q.ring) {
		return fmt.Errorf("cq %d overflow", q.num)
	}
	q.ring[q.tail%len(q.ring)] = wc
	q.tail++
	return nil
}

// PollSpin counts the call; spinning longer could not bring a completion on this NIC.
func (q *instantCQ) PollSpin(wc []nic.WC, spins int) (int, error) {
	q.nic.spins++
	return q.Poll(wc)
}

func (q *instantCQ) Poll(wc []nic.WC) (int, error) {
	n := 0
	for n < len(wc) && q.head < q.tail {
		wc[n] = q.ring[q.head%len(q.ring)]
		q.head++
		n++
	}
	return n, nil
}

type instantQP struct {
	nic  *instantNIC
	num  uint32
	rank int
	s, r *instantCQ
	drop bool // receives never complete
}

func (q *instantQP) Num() uint32              { return q.num }
func (q *instantQP) Info() nic.QPInfo         { return nic.QPInfo{Rank: q.rank, QPN: q.num} }
func (q *instantQP) Connect(nic.QPInfo) error { return nil }
func (q *instantQP) Close() error             { return nil }
func (q *instantQP) PostSend(wr []nic.SendWR) (int, error) {
	for i := range wr {
		if wr[i].Flags&nic.FlagSignaled != 0 {
			if err := q.s.push(nic.WC{ID: wr[i].ID, Opcode: wr[i].Op, QPN: q.num}); err != nil {
				return i, err
			}
		}
	}
	return len(wr), nil
}
func (q *instantQP) PostRecv(wr []nic.RecvWR) (int, error) {
	for i := range wr {
		if q.drop {
			if w := q.nic.wait; w != nil && w.release {
				w.held = append(w.held, heldRecv{q.r, nic.WC{ID: wr[i].ID, Opcode: nic.OpRecv, QPN: q.num}})
			}
			continue
		}
		if err := q.r.push(nic.WC{ID: wr[i].ID, Opcode: nic.OpRecv, QPN: q.num}); err != nil {
			return i, err
		}
	}
	return len(wr), nil
}

// dispatchPlan builds a plan of about ops ops over 4 ranks in a ring: at each step a rank sends
// one element to the right and receives one from the left, and each send waits for the
// previous receive, so the engine resolves a dependency for every other WQE.
func dispatchPlan(ops int) *ir.Graph {
	const ranks = 4
	steps := ops / (2 * ranks)
	b := newBuild("dispatch", ranks)
	data := b.buffer("data", ir.U64, 64, 0, nil)
	tmp := b.buffer("tmp", ir.U64, 64, 0, nil)
	b.forEach(func(rb *rankB) {
		rb.queue("right", (rb.r+1)%ranks, "left")
		rb.queue("left", (rb.r+ranks-1)%ranks, "right")
		for s := 0; s < steps; s++ {
			e := int64(s % 64)
			spec := opSpec{Kind: ir.OpSend, Q: "right", Src: sl(data, e, e+1)}
			if s > 0 {
				spec.After = []string{fmt.Sprintf("rx[%d]", s-1)}
			}
			rb.op(fmt.Sprintf("tx[%d]", s), spec)
			rb.op(fmt.Sprintf("rx[%d]", s), opSpec{Kind: ir.OpRecv, Q: "left", Dst: sl(tmp, e, e+1)})
		}
	})
	return b.done()
}

func newDispatchEngine(tb testing.TB, ops int) (*pollEngine, int) {
	return newInstantEngine(tb, ops, &instantNIC{}, time.Second)
}

func newInstantEngine(tb testing.TB, ops int, p *instantNIC, hang time.Duration) (*pollEngine, int) {
	return newInstantEngineFor(tb, dispatchPlan(ops), p, hang)
}

func newInstantEngineFor(tb testing.TB, g *ir.Graph, p *instantNIC, hang time.Duration) (*pollEngine, int) {
	ranks := make([]int, len(g.Rank))
	for r := range ranks {
		ranks[r] = r
	}
	plan, err := lower.Compile(tb.Context(), g, mustTarget(tb, "generic"))
	require.NoError(tb, err)
	res, err := setupRanks(context.Background(), p, g, ranks,
		func(r int) (rankLayout, error) { return pollLayout(plan, r, p.Caps()) }, nil, nil)
	require.NoError(tb, err)
	mem := NewMemory(g)
	e, err := newPoll(plan, mem, res, p, Options{HangTimeout: hang})
	require.NoError(tb, err)
	return e, len(g.Ops)
}

func TestPollDispatchAllocatesNothing(t *testing.T) {
	e, n := newDispatchEngine(t, 10_000)
	ctx := context.Background()
	e.rearm(0, true)
	require.NoError(t, e.prepost())
	require.NoError(t, e.iterate(ctx, 0))
	require.Equal(t, uint64(n), e.posted, "every op of the plan is a WQE")
	allocs := testing.AllocsPerRun(20, func() {
		e.rearm(1, true)
		if err := e.prepost(); err != nil {
			t.Fatal(err)
		}
		if err := e.iterate(ctx, 1); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "allocations per iteration of a %d-op plan", n)
}

// TestPollHangsOnSilentNIC: on a NIC that progresses by itself, an iteration whose completions
// never come ends with a diagnosis soon after the hang timeout, however the idle rounds fall
// relative to the rounds that poll every CQ.
func TestPollHangsOnSilentNIC(t *testing.T) {
	for _, ops := range []int{8, 24, 1000} {
		for _, hang := range []time.Duration{time.Millisecond, 7 * time.Millisecond, 20 * time.Millisecond} {
			e, _ := newInstantEngine(t, ops, &instantNIC{dropRecv: true}, hang)
			e.rearm(0, true)
			require.NoError(t, e.prepost())
			start := time.Now()
			err := e.iterate(context.Background(), 0)
			var h *HangError
			require.ErrorAs(t, err, &h, "ops %d, hang timeout %v", ops, hang)
			assert.Contains(t, err.Error(), "rx[0]")
			assert.Less(t, time.Since(start), hang+2*time.Second, "ops %d, hang timeout %v", ops, hang)
		}
	}
}

// TestPollBlocksWhenIdle: with a NIC whose CQs can block (nic.Blocker), an engine that finds
// nothing to do spins a little, then blocks; a completion that comes while it is blocked is
// polled when it wakes, and the iteration ends.
func TestPollBlocksWhenIdle(t *testing.T) {
	w := &instantWait{release: true}
	e, _ := newInstantEngine(t, 24, &instantNIC{dropRecv: true, wait: w}, 3*time.Second)
	e.rearm(0, true)
	require.NoError(t, e.prepost())
	require.NoError(t, e.iterate(context.Background(), 0))
	assert.Positive(t, w.calls, "the receives complete only once the engine blocks")
	assert.LessOrEqual(t, w.longest, maxBlock)
	var r Result
	e.counters(&r)
	assert.Equal(t, uint64(w.calls), r.Blocks)
	assert.Zero(t, e.left, "every op completed")
}

// TestPollBlockingHangs: a blocked engine whose completions never come still ends with a
// diagnosis after the hang timeout, each wait bounded by what is left of it.
func TestPollBlockingHangs(t *testing.T) {
	for _, hang := range []time.Duration{time.Millisecond, 25 * time.Millisecond} {
		w := &instantWait{}
		e, _ := newInstantEngine(t, 24, &instantNIC{dropRecv: true, wait: w}, hang)
		e.rearm(0, true)
		require.NoError(t, e.prepost())
		start := time.Now()
		err := e.iterate(context.Background(), 0)
		var h *HangError
		require.ErrorAs(t, err, &h, "hang timeout %v", hang)
		assert.Contains(t, err.Error(), "rx[0]")
		assert.Positive(t, w.calls)
		assert.LessOrEqual(t, w.longest, min(hang, maxBlock))
		assert.GreaterOrEqual(t, time.Since(start), hang)
		assert.Less(t, time.Since(start), hang+2*time.Second)
	}
}

// TestPollSpinsOnTheOnlyCQ: when one CQ is all the engine waits for, it lets the driver spin on
// it (SpinCQ), and a completion that never comes is still diagnosed after the hang timeout.
func TestPollSpinsOnTheOnlyCQ(t *testing.T) {
	src := "plan solo\nparam ranks = 1\nbuffer b u64[1]\nqueue q to rank\nop tx = send q b\nop rx = recv q b\n"
	g, err := planner.Load(t.Context(), "solo.dag", []byte(src), nil, planner.Options{})
	require.NoError(t, err)
	sn := &instantNIC{dropRecv: true}
	e, _ := newInstantEngineFor(t, g, sn, 20*time.Millisecond)
	e.rearm(0, true)
	require.NoError(t, e.prepost())
	err = e.iterate(context.Background(), 0)
	var h *HangError
	require.ErrorAs(t, err, &h)
	assert.Contains(t, err.Error(), "rx")
	assert.Positive(t, sn.spins, "the receive CQ alone owes a completion")
}

// TestQPInlineFitsThePlan: Run creates QPs with room for the largest inline payload the plan's
// target allows, not the NIC's maximum, and still sends small payloads inline.
func TestQPInlineFitsThePlan(t *testing.T) {
	g := dispatchPlan(64)
	plan, err := lower.Compile(t.Context(), g, mustTarget(t, "generic"))
	require.NoError(t, err)
	p := &instantNIC{}
	require.Greater(t, p.Caps().MaxInline, plan.Target.MaxInline, "the test needs a NIC that allows more than the target")
	res, err := Run(context.Background(), plan, p, Options{Engine: Poll})
	require.NoError(t, err)
	require.True(t, res.OK)
	require.NotEmpty(t, p.qpInlines)
	for _, n := range p.qpInlines {
		assert.Equal(t, plan.Target.MaxInline, n)
	}
}

// BenchmarkPollDispatch measures the polling engine on an instant provider: nanoseconds per WQE
// for a 10,000-op plan, and the cost of re-arming relative to one iteration.
func BenchmarkPollDispatch(b *testing.B) {
	e, n := newDispatchEngine(b, 10_000)
	ctx := context.Background()
	var rearm, run time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		e.rearm(i, true)
		t1 := time.Now()
		if err := e.prepost(); err != nil { // posting work, not re-arming: counted as the run's
			b.Fatal(err)
		}
		if err := e.iterate(ctx, i); err != nil {
			b.Fatal(err)
		}
		rearm += t1.Sub(t0)
		run += time.Since(t1)
	}
	b.ReportMetric(float64(run.Nanoseconds())/float64(b.N)/float64(n), "ns/wqe")
	b.ReportMetric(float64(rearm.Nanoseconds())/float64(b.N), "rearm-ns")
	b.ReportMetric(100*float64(rearm)/float64(run), "rearm-%")
}

func mustTarget(tb testing.TB, name string) ir.Target {
	t, err := ir.LookupTarget(name)
	require.NoError(tb, err)
	return t
}

// fakeTrig records what the engine arms; fakeHold records what it lets a CQ hold.
type fakeTrig struct {
	nic.QP
	armed []struct {
		cq    nic.CQ
		after int
		id    uint64
	}
}

func (f *fakeTrig) ArmSend(cq nic.CQ, after int, wr *nic.SendWR) error {
	f.armed = append(f.armed, struct {
		cq    nic.CQ
		after int
		id    uint64
	}{cq, after, wr.ID})
	return nil
}
func (f *fakeTrig) Fired() (int, int, error) { return len(f.armed), 0, nil }
func (f *fakeTrig) Disarm()                  { f.armed = nil }

type fakeHold struct {
	nic.CQ
	held int
}

func (f *fakeHold) Hold(n int) { f.held = n }

// TestArmChain: on rank 1 of the ping-pong, every hop waits for one receive posted in advance, so
// the engine arms MaxArmed hops at once, the k-th after k receive completions, and lets the
// receive CQ hold as many completions: each only releases an armed hop.
func TestArmChain(t *testing.T) {
	src, err := os.ReadFile("../testdata/verbs/pingpong.dag")
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), "pingpong.dag", src, map[string]int64{"hops": 200}, planner.Options{})
	require.NoError(t, err)
	e, _ := newInstantEngineFor(t, g, &instantNIC{dropRecv: true}, time.Second)
	var trig *fakeTrig
	var hold *fakeHold
	for si := range e.sides {
		s := &e.sides[si]
		if s.rank != 1 {
			continue
		}
		if s.recv {
			hold = &fakeHold{CQ: e.cqs[s.cq].cq}
			e.cqs[s.cq].hold = hold
			e.holdCQs = append(e.holdCQs, s.cq)
		} else {
			trig = &fakeTrig{QP: s.qp}
			s.trig = trig
			e.trigSides = append(e.trigSides, int32(si))
		}
	}
	e.rearm(0, true)
	require.NoError(t, e.prepost())
	e.arm()
	require.Len(t, trig.armed, nic.MaxArmed)
	for k, a := range trig.armed {
		assert.Equal(t, k+1, a.after, "hop %d", k)
		assert.Equal(t, e.g.OpString(ir.OpID(a.id)), fmt.Sprintf("hop[%d] on rank 1", 2*k+1))
	}
	assert.Equal(t, nic.MaxArmed, hold.held, "the receives that release armed hops")
	e.disarm()
	assert.Empty(t, trig.armed)
	assert.Zero(t, hold.held)
}

// stampCQ stamps every completion it returns with exec's clock plus skew, when asked to.
type stampCQ struct {
	*instantCQ
	on   bool
	skew int64
}

func (q *stampCQ) Stamp(on bool) { q.on = on }
func (q *stampCQ) Poll(wc []nic.WC) (int, error) {
	n, err := q.instantCQ.Poll(wc)
	for i := range wc[:n] {
		if q.on {
			wc[i].Time = nic.Now() + q.skew
		}
	}
	return n, err
}

// TestTimelineTakesDriverStamps: the polling engine dates a completion with the time its driver
// stamped on it (StampCQ), not with when the engine handled it; a stamp from before the iteration
// began (a counter mapped onto the clock errs by microseconds, and the first completion of an
// iteration can be found right at its start) dates it at the start, never before.
func TestTimelineTakesDriverStamps(t *testing.T) {
	for _, skew := range []int64{int64(time.Hour), -int64(time.Hour)} {
		e, n := newInstantEngine(t, 64, &instantNIC{}, time.Second)
		e.times = make([]time.Duration, n)
		for ci := range e.cqs {
			q := &stampCQ{instantCQ: e.cqs[ci].cq.(*instantCQ), skew: skew}
			q.Stamp(true)
			e.cqs[ci].cq, e.cqs[ci].spin = q, nil
		}
		e.rearm(0, true)
		require.NoError(t, e.prepost())
		require.NoError(t, e.iterate(context.Background(), 0))
		for id, at := range e.times {
			op := e.g.OpString(ir.OpID(id))
			if skew > 0 {
				assert.GreaterOrEqual(t, at, time.Duration(skew), "%s", op)
				assert.Less(t, at, time.Duration(skew)+time.Minute, "%s", op)
			} else if e.g.Ops[id].Queue != ir.None {
				assert.Zero(t, at, "%s: stamped an hour before the iteration began", op)
			} else {
				assert.GreaterOrEqual(t, at, time.Duration(0), "%s: a host op", op)
			}
		}
	}
}
