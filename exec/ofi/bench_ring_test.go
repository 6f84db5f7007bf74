//go:build ofi && linux

package ofi_test

import (
	"testing"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/ofi"
	"github.com/coredag/coredag/internal/ringbench"
)

// BenchmarkRingAllreduce is plans/ring_allreduce.dag at 4 ranks on libfabric's sockets provider
// over loopback, every rank in this process, 64Ki to 1Mi f32 per rank: the offload engine
// (triggered-sockets: counters and triggered operations) beside the poll engine (generic), ns/op
// and CPU-ns/op per iteration (all threads, the provider's progress threads included), resets
// left out. exec's BenchmarkRingAllreduce runs the same on the software NIC.
//
//	FI_SOCKETS_IFACE=lo go test -tags ofi ./exec/ofi -run X -bench RingAllreduce -count 5
func BenchmarkRingAllreduce(b *testing.B) {
	opts := ofi.DefaultOptions()
	opts.Provider = "sockets"
	p, err := ofi.NewProvider(opts)
	if err != nil {
		b.Skipf("no libfabric sockets provider: %v", err)
	}
	defer p.Close()
	ringbench.Run(b, func(exec.Engine) nic.Provider { return p },
		[]ringbench.Engine{{Name: "offload", Engine: exec.Offload, Target: "triggered-sockets"}, {Name: "poll", Engine: exec.Poll, Target: "generic"}}, ringbench.Sizes)
}
