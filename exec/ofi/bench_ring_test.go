//go:build ofi && linux

package ofi_test

import (
	"strings"
	"testing"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/ringbench"
)

// BenchmarkRingAllreduce is plans/ring_allreduce.dag at 4 ranks on each libfabric provider (shm,
// tcp;ofi_rxm and sockets over loopback; providers libfabric lacks are skipped), every rank in
// this process, 64Ki to 1Mi f32 per rank: the poll engine (generic), and where the provider has
// FI_TRIGGER the offload engine (triggered-sockets: counters and triggered operations) beside
// it; ns/op and CPU-ns/op per iteration (all threads, the provider's progress threads included),
// resets left out. exec's BenchmarkRingAllreduce runs the same on the software NIC.
//
//	go test -tags ofi ./exec/ofi -run X -bench RingAllreduce -count 5
func BenchmarkRingAllreduce(b *testing.B) {
	for _, name := range providers {
		b.Run("prov="+strings.ReplaceAll(name, ";", "+"), func(b *testing.B) {
			p := openNamed(b, name)
			engines := []ringbench.Engine{{Name: "poll", Engine: exec.Poll, Target: "generic"}}
			if p.Triggered() {
				engines = append(engines, ringbench.Engine{Name: "offload", Engine: exec.Offload, Target: "triggered-sockets"})
			}
			ringbench.Run(b, func(exec.Engine) nic.Provider { return p }, engines, ringbench.Sizes)
		})
	}
}
