//go:build ofi && linux

package ofi_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/internal/ringbench"
)

// BenchmarkWaitPlans runs the plans whose ranks wait for landed writes (counted_ring) or for a
// memory word (credit_ring) on sockets, 4 ranks in this process, m messages per rank: the poll
// engine (generic) beside the offload engine (triggered-sockets). An op is one iteration of a
// session prepared once (Session.RunTimed: the buffers' reset is left out); CPU-ns/op is the
// process's CPU time over the same regions. Memory is checked after every op.
//
//	FI_SOCKETS_IFACE=lo go test -tags ofi ./exec/ofi -run X -bench WaitPlans -benchtime 20x -count 5
func BenchmarkWaitPlans(b *testing.B) {
	p := socketsProvider(b)
	if !p.RMAEvent() || !p.Triggered() {
		b.Skipf("sockets has no FI_RMA_EVENT or FI_TRIGGER here")
	}
	plans := []string{"../../docs/examples/counted_ring.dag", "../../plans/credit_ring.dag"}
	for _, f := range plans {
		for _, m := range []int64{6, 24, 48} {
			for _, c := range []struct {
				name   string
				engine exec.Engine
				target string
			}{{"poll", exec.Poll, "generic"}, {"offload", exec.Offload, "triggered-sockets"}} {
				name := fmt.Sprintf("plan=%s/m=%d/engine=%s", strings.TrimSuffix(filepath.Base(f), ".dag"), m, c.name)
				b.Run(name, func(b *testing.B) {
					_, plan := compileFile(b, f, map[string]int64{"ranks": 4, "m": m}, c.target)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					defer cancel()
					s, err := exec.Prepare(ctx, plan, p, exec.Options{Engine: c.engine})
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					ringbench.Iterate(b, ctx, s)
				})
			}
		}
	}
}
