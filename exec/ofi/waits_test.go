//go:build ofi && linux

package ofi_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
)

// countedPlans count the writes that land in a region: a part of a buffer (the ring's slots, the
// chain's chunks) or a whole one (the allgather's `all`).
var countedPlans = []string{"../../docs/examples/counted_ring.dag", "../../docs/examples/counted_allgather.dag", "../../testdata/onesided/counted_chain.dag"}

// TestWaitPlansSockets runs the plans that wait for landed writes on sockets, every rank in this
// process, on the poll engine and on libfabric's triggered operations (the chain's forwarding
// writes at thresholds on the chunks' remote-write counters): each counted part of a buffer is
// registered on its own, with its own key and counter, and the writers into it name that key.
func TestWaitPlansSockets(t *testing.T) {
	p := socketsProvider(t)
	if !p.RMAEvent() || !p.Triggered() {
		t.Skipf("sockets has no FI_RMA_EVENT or FI_TRIGGER here")
	}
	for _, f := range countedPlans {
		for _, ranks := range []int64{2, 4} {
			for _, c := range []struct {
				engine exec.Engine
				target string
			}{{exec.Poll, "generic"}, {exec.Offload, "triggered-sockets"}} {
				t.Run(fmt.Sprintf("%s/ranks=%d/%s", filepath.Base(f), ranks, c.target), func(t *testing.T) {
					_, plan := compileFile(t, f, map[string]int64{"ranks": ranks}, c.target)
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					res, err := exec.Run(ctx, plan, p, exec.Options{Engine: c.engine, Iters: 4})
					require.NoError(t, err)
					require.True(t, res.OK, res.Summary())
				})
			}
		}
	}
}

// TestWaitPlansRefused: shm reports FI_RMA_EVENT but does not bind a counter to a region
// (fi_mr_bind is not implemented), and tcp;ofi_rxm has no FI_RMA_EVENT: a plan that waits for
// landed writes is refused before it runs, naming the wait.
func TestWaitPlansRefused(t *testing.T) {
	for _, prov := range []string{"shm", "tcp;ofi_rxm"} {
		t.Run(prov, func(t *testing.T) {
			p := openNamed(t, prov)
			_, plan := compileFile(t, countedPlans[0], map[string]int64{"ranks": 2}, "generic")
			_, err := exec.Run(context.Background(), plan, p, exec.Options{Engine: exec.Poll, Iters: 1})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "counted_ring.dag:40:")
			assert.Contains(t, err.Error(), "counting the writes that land in ring[0:4]")
		})
	}
}
