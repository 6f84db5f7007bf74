package exec_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
)

// TestChainAllreduce runs testdata/scale/chain_allreduce.dag on every engine, round-robin and
// seeded: every element of data ends as ranks * (ranks + 1) / 2 on every rank.
func TestChainAllreduce(t *testing.T) {
	for _, ranks := range []int{2, 3, 8} {
		g, _ := loadPlan(t, "../testdata/scale/chain_allreduce.dag", ranks, map[string]int64{"chunks": 5, "c": 4})
		for _, c := range engineCases {
			for _, seed := range []uint64{0, 7} {
				t.Run(fmt.Sprintf("ranks=%d/%s/seed=%d", ranks, c.name, seed), func(t *testing.T) {
					res, _, _, err := runCase(t, g, c, seed, 3, false)
					require.NoError(t, err)
					require.True(t, res.OK, res.Summary())
					each(t, g, res.Memory, "data", func(int, int64) float64 { return float64(ranks * (ranks + 1) / 2) })
				})
			}
		}
	}
}

// progressOnly is a software NIC seen without nic.CQNotifier, as the engines see a NIC that
// cannot say which CQs have completions: they then poll every CQ that may have some.
type progressOnly struct {
	nic.Provider
	nic.Progresser
}

// TestEnginesWithoutNotifier runs the plan library on both engines through a NIC that does not
// list its ready CQs.
func TestEnginesWithoutNotifier(t *testing.T) {
	files, err := filepath.Glob("../plans/*.dag")
	require.NoError(t, err)
	files = append(files, "../testdata/scale/chain_allreduce.dag")
	for _, f := range files {
		g, ok := loadPlan(t, f, 4)
		if !ok {
			continue
		}
		for _, e := range ringEngines {
			t.Run(filepath.Base(f)+"/"+e.name, func(t *testing.T) {
				plan := mustCompile(t, g, e.engine)
				sn := softnic.New(softnic.Options{NoCrossChannel: e.engine == exec.Poll})
				var p nic.Provider = progressOnly{sn, sn}
				_, isNotifier := p.(nic.CQNotifier)
				require.False(t, isNotifier)
				res, err := exec.Run(context.Background(), plan, p, exec.Options{Engine: e.engine, Iters: 2})
				require.NoError(t, err)
				require.True(t, res.OK, res.Summary())
				if e.engine == exec.Offload {
					require.Equal(t, uint64(sumPer(plan)*2), res.CQEsPolled)
				}
			})
		}
	}
}

// sumPer is the number of completions a plan's CQs produce per iteration.
func sumPer(p *ir.Plan) int {
	n := 0
	for _, rp := range p.Ranks {
		for _, c := range rp.CQs {
			n += int(c.PerIteration)
		}
	}
	return n
}
