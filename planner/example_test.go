package planner_test

import (
	"context"
	"fmt"
	"os"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
)

// Load a plan from the library with its params overridden (as `coredag check -p` does), compile
// it for a cross-channel NIC (as `coredag compile --target connectx` does) and look at the result.
func ExampleLoad() {
	src, err := os.ReadFile("../plans/ring_allreduce.dag")
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := planner.Load(context.Background(), "ring_allreduce.dag", src, map[string]int64{"ranks": 3, "n": 16}, planner.Options{})
	if err != nil {
		fmt.Println(err) // a diag.List: every diagnostic with its position
		return
	}
	fmt.Printf("plan %s: %d ranks, %d ops, %d buffers\n", g.Name, g.Ranks, len(g.Ops), len(g.Buffers))

	target, err := ir.LookupTarget("connectx")
	if err != nil {
		fmt.Println(err)
		return
	}
	plan, err := planner.Compile(context.Background(), g, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("target %s (%s style)\n", plan.Target.Name, plan.Target.Style)
	r0 := plan.Ranks[0]
	fmt.Printf("rank 0: %d work queues, %d CQs, management queue %q\n", len(r0.Queues), len(r0.CQs), r0.Queues[r0.Mgmt].Name)
	s := plan.Stats
	fmt.Printf("all ranks: %d WQEs (%d data), %d WAITs, %d ENABLEs, %d host steps\n", s.WQEs, s.DataWQEs, s.Waits, s.Enables, s.HostSteps)
	// Output:
	// plan ring_allreduce: 3 ranks, 30 ops, 2 buffers
	// target connectx (managed style)
	// rank 0: 6 work queues, 6 CQs, management queue "mgmt"
	// all ranks: 54 WQEs (24 data), 9 WAITs, 15 ENABLEs, 6 host steps
}

// A plan with mistakes: Load returns every diagnostic of the failing phase, and diag.Print
// prints them as `coredag check` does, with the source line and a caret.
func ExampleLoad_diagnostics() {
	src := []byte(`plan p
param ranks = 2
buffer b u8[4]
op c = copy b[0:2] to b[1:5]
`)
	_, err := planner.Load(context.Background(), "p.dag", src, nil, planner.Options{})
	diag.Print(os.Stdout, err, diag.Sources{"p.dag": src})
	// Output:
	// p.dag:4:27: slice b[1:5] ends past the end of b (4 elements)
	//     op c = copy b[0:2] to b[1:5]
	//                               ^
}
