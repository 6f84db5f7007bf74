package exec

import (
	"context"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/lower"
)

// Test-only exports for the external test package (which may import exec/softnic).
var (
	RingAllreduceForTest = ringAllreduce
	ExchangeForTest      = exchange
)

// FaultGraphForTest builds graphs the checker would reject, for fault tests: "perm" (a write
// into a buffer without remote_write), "oob" (a read past the end of the peer's buffer),
// "unmatched" (a send no recv ever matches), "unsignalled" (the same send after two writes that
// the compiler leaves unsignalled) and "deadlock" (each rank's send waits for its recv).
func FaultGraphForTest(kind string) *ir.Graph {
	b := newBuild(kind, 2)
	switch kind {
	case "perm":
		x := b.buffer("x", ir.U8, 8, 0, nil)
		b.forEach(func(rb *rankB) {
			rb.queue("q", 1-rb.r, "")
			if rb.r == 0 {
				rb.op("w", opSpec{Kind: ir.OpWrite, Q: "q", Src: sl(x, 0, 8), Dst: sl(x, 0, 8)})
			}
		})
	case "oob":
		x := b.buffer("x", ir.U8, 8, ir.RemoteRead, nil)
		b.forEach(func(rb *rankB) {
			rb.queue("q", 1-rb.r, "")
			if rb.r == 1 {
				rb.op("rd", opSpec{Kind: ir.OpRead, Q: "q", Src: sl(x, 4, 12), Dst: sl(x, 0, 8)})
			}
		})
	case "unmatched":
		b.forEach(func(rb *rankB) {
			rb.queue("q", 1-rb.r, "")
			if rb.r == 0 {
				rb.op("lonely", opSpec{Kind: ir.OpSend, Q: "q"})
			}
		})
	case "unsignalled":
		x := b.buffer("x", ir.U8, 8, ir.RemoteWrite, nil)
		b.forEach(func(rb *rankB) {
			rb.queue("q", 1-rb.r, "")
			if rb.r == 0 {
				rb.op("w1", opSpec{Kind: ir.OpWrite, Q: "q", Src: sl(x, 0, 8), Dst: sl(x, 0, 8)})
				rb.op("w2", opSpec{Kind: ir.OpWrite, Q: "q", Src: sl(x, 0, 8), Dst: sl(x, 0, 8)})
				rb.op("lonely", opSpec{Kind: ir.OpSend, Q: "q"})
			}
		})
	case "deadlock":
		b.forEach(func(rb *rankB) {
			rb.queue("q", 1-rb.r, "")
			rb.op("rx", opSpec{Kind: ir.OpRecv, Q: "q"})
			rb.op("tx", opSpec{Kind: ir.OpSend, Q: "q", After: []string{"rx"}})
		})
	}
	return b.done()
}

// GenericPlanForTest compiles g for the generic target even when its `after` edges close a cycle
// the compiler refuses (the "deadlock" fault graph): it compiles g without its edges, then gives
// the plan g itself and g's dependencies (Deps), so the polling engine meets the fault at run time.
func GenericPlanForTest(g *ir.Graph) (*ir.Plan, error) {
	t, err := ir.LookupTarget("generic")
	if err != nil {
		return nil, err
	}
	plan, err := lower.Compile(context.Background(), g.WithEdges(nil), t)
	if err != nil {
		return nil, err
	}
	plan.Graph = g
	d := &ir.Deps{PredStart: []int32{0}, SuccStart: []int32{0}}
	for o := range g.Ops {
		d.PredList = append(d.PredList, g.Preds(ir.OpID(o))...)
		d.SuccList = append(d.SuccList, g.Succs(ir.OpID(o))...)
		d.PredStart = append(d.PredStart, int32(len(d.PredList)))
		d.SuccStart = append(d.SuccStart, int32(len(d.SuccList)))
	}
	plan.Deps = d
	return plan, nil
}

// HandedForTest says whether the Op's last start ran on its background goroutine (not on the
// goroutine of its Wait).
func (o *Op) HandedForTest() bool { return !o.byWait }

// MemoryForTest is the memory of the Op's session (nil before the first start).
func (o *Op) MemoryForTest() *Memory {
	if o.s == nil {
		return nil
	}
	return o.s.mem
}
