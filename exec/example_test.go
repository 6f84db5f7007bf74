package exec_test

import (
	"context"
	"fmt"
	"os"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

// Run a plan from the library on the software NIC with both engines, as `coredag run` does:
// the offload engine posts the chains compiled for connectx and lets the NIC walk their WAIT and
// ENABLE entries; the polling engine walks the DAG on the CPU. Each run compares the final memory
// of every rank with the serial reference interpreter's.
func ExampleRun() {
	src, err := os.ReadFile("../plans/ring_allreduce.dag")
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := planner.Load(context.Background(), "ring_allreduce.dag", src, map[string]int64{"ranks": 3, "n": 4}, planner.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ref, err := exec.Reference(g) // computed once, shared by both runs
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, engine := range []exec.Engine{exec.Offload, exec.Poll} {
		sn := softnic.New(softnic.Options{})
		// Select picks the target for the engine (connectx for offload, generic for poll).
		engine, target, err := exec.Select(engine, "", sn.Caps())
		if err != nil {
			fmt.Println(err) // an *exec.SelectError
			return
		}
		plan, err := lower.Compile(context.Background(), g, target)
		if err != nil {
			fmt.Println(err)
			return
		}
		res, err := exec.Run(context.Background(), plan, sn, exec.Options{Engine: engine, Iters: 3, Reference: ref})
		if err != nil {
			fmt.Println(err) // an *exec.OpError or *exec.HangError naming the op
			return
		}
		fmt.Printf("%s engine, target %s, %d iterations: ok=%v\n", res.Engine, res.Target, res.Iters, res.OK)
		fmt.Printf("  WQEs posted %d, CQEs polled %d, WAITs %d, host steps %d\n", res.WQEsPosted, res.CQEsPolled, res.Waits, res.HostSteps)
		data, _ := res.Memory.Buffer("data")
		fmt.Println("  rank 2 data:", res.Memory.Values(2, data))
	}
	// Output:
	// offload engine, target connectx, 3 iterations: ok=true
	//   WQEs posted 162, CQEs polled 72, WAITs 27, host steps 18
	//   rank 2 data: [6 6 6 6 6 6 6 6 6 6 6 6]
	// poll engine, target generic, 3 iterations: ok=true
	//   WQEs posted 72, CQEs polled 45, WAITs 0, host steps 18
	//   rank 2 data: [6 6 6 6 6 6 6 6 6 6 6 6]
}

// A persistent plan is compiled once and prepared once: Prepare opens every rank, registers the
// buffers and connects the queues; each Session.Run then only re-arms the chains and runs.
func ExamplePrepare() {
	src, err := os.ReadFile("../plans/ring_allreduce.dag")
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := planner.Load(context.Background(), "ring_allreduce.dag", src, map[string]int64{"ranks": 4, "n": 8}, planner.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	sn := softnic.New(softnic.Options{})
	engine, target, err := exec.Select(exec.Auto, "", sn.Caps())
	if err != nil {
		fmt.Println(err)
		return
	}
	plan, err := lower.Compile(context.Background(), g, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := exec.Prepare(context.Background(), plan, sn, exec.Options{Engine: engine})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for call := 1; call <= 3; call++ {
		res, err := s.Run(context.Background(), 2)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("run %d: %s engine, target %s, %d iterations, ok=%v, WQEs posted %d\n", call, res.Engine, res.Target, res.Iters, res.OK, res.WQEsPosted)
	}
	// Output:
	// run 1: offload engine, target connectx, 2 iterations, ok=true, WQEs posted 216
	// run 2: offload engine, target connectx, 2 iterations, ok=true, WQEs posted 216
	// run 3: offload engine, target connectx, 2 iterations, ok=true, WQEs posted 216
}
