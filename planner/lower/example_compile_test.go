package lower_test

import (
	"context"
	"fmt"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

// Parse, check and compile a plan, then look at what the NIC will run.
func ExampleCompile() {
	src := `plan pingpong
param ranks = 2
buffer a u64[8]
buffer b u64[8]
queue q to 1 - rank
op tx = send q a
op rx = recv q b
op back = send q b after rx
op got = recv q a after tx
`
	g, err := planner.Load(context.Background(), "pingpong.dag", []byte(src), nil, planner.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	target, _ := ir.LookupTarget("connectx")
	plan, err := lower.Compile(context.Background(), g, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	mgmt := plan.Ranks[0].Queues[plan.Ranks[0].Mgmt].Chain
	for k := range mgmt {
		fmt.Println(mgmt[k].Opcode, plan.OpOf(&mgmt[k]).Name)
	}
	fmt.Printf("WAITs: %d naive, %d after minimisation\n", plan.Stats.NaiveWaits, plan.Stats.Waits)
	// Output:
	// SEND_EN tx
	// RECV_EN rx
	// CQE_WAIT back
	// SEND_EN back
	// CQE_WAIT got
	// RECV_EN got
	// WAITs: 4 naive, 4 after minimisation
}
