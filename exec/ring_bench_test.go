package exec_test

import (
	"testing"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/internal/ringbench"
)

// BenchmarkRingAllreduce is plans/ring_allreduce.dag at 4 ranks on the software NIC, 64Ki to
// 1Mi f32 per rank, the offload engine (connectx) beside the poll engine (generic): ns/op and
// CPU-ns/op per iteration, resets left out. exec/ofi's BenchmarkRingAllreduce runs the same on
// libfabric.
func BenchmarkRingAllreduce(b *testing.B) {
	ringbench.Run(b, func(e exec.Engine) nic.Provider {
		return softnic.New(softnic.Options{NoCrossChannel: e == exec.Poll})
	}, []ringbench.Engine{{Name: "offload", Engine: exec.Offload, Target: "connectx"}, {Name: "poll", Engine: exec.Poll, Target: "generic"}}, ringbench.Sizes)
}
