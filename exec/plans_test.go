package exec_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
)

// expectation checks a plan's final memory against its known mathematical result, computed here
// from the math, independently of the reference interpreter.
type expectation func(t *testing.T, g *ir.Graph, m *exec.Memory)

func param(t *testing.T, g *ir.Graph, name string) int64 {
	v, ok := g.Param(name)
	require.True(t, ok, "plan %s has no param %s", g.Name, name)
	return v
}

func buf(t *testing.T, m *exec.Memory, name string) ir.BufID {
	b, ok := m.Buffer(name)
	require.True(t, ok, "no buffer %s", name)
	return b
}

// each checks want(rank, i) for every element of buffer name on every rank.
func each(t *testing.T, g *ir.Graph, m *exec.Memory, name string, want func(r int, i int64) float64) {
	t.Helper()
	b := buf(t, m, name)
	for r := 0; r < g.Ranks; r++ {
		for i, v := range m.Float64s(r, b) {
			if w := want(r, int64(i)); v != w {
				require.Failf(t, "wrong result", "%s ranks=%d: rank %d %s[%d] = %v, the math says %v", g.Name, g.Ranks, r, name, i, v, w)
			}
		}
	}
}

// sumOfRanks is the result of an allreduce of data, where rank r contributes 1000 * r + i.
func sumOfRanks(t *testing.T, g *ir.Graph, m *exec.Memory) {
	p := int64(g.Ranks)
	each(t, g, m, "data", func(_ int, i int64) float64 { return float64(p*i + 1000*p*(p-1)/2) })
}

var expectations = map[string]expectation{
	"ring_allreduce": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		n := float64(g.Ranks * (g.Ranks + 1) / 2)
		each(t, g, m, "data", func(int, int64) float64 { return n })
	},
	"recursive_doubling_allreduce": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		p := int64(g.Ranks)
		each(t, g, m, "data", func(_ int, i int64) float64 { return float64(p*i + 1000*p*(p-1)/2) })
	},
	"rabenseifner_allreduce":       sumOfRanks,
	"double_binary_tree_allreduce": sumOfRanks,
	"dissemination_barrier":        func(*testing.T, *ir.Graph, *exec.Memory) {},
	"binomial_bcast": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		each(t, g, m, "data", func(_ int, i int64) float64 { return float64(1000 + i) })
	},
	"ring_allgather": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		each(t, g, m, "data", func(_ int, i int64) float64 { return float64(i + 1) })
	},
	"pairwise_alltoall": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		n := param(t, g, "n")
		each(t, g, m, "dst", func(r int, i int64) float64 { return float64((i/n)*1_000_000 + int64(r)*n + i%n) })
	},
	"ring_allgatherv": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		n := param(t, g, "n")
		each(t, g, m, "all", func(_ int, i int64) float64 {
			q := int64(0) // the block of i: rank q's n + q elements, packed in rank order
			for start := int64(0); i >= start+n+q; q++ {
				start += n + q
			}
			return float64(q*1_000_000 + i - (q*n + q*(q-1)/2))
		})
	},
	"pairwise_alltoallv": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		n, p := param(t, g, "n"), int64(g.Ranks)
		cnt := func(a, b int64) int64 { return n + (a+b)%2*n }
		packed := func(a, b int64) int64 { return b*n + (b+a%2)/2*n }
		each(t, g, m, "dst", func(r int, i int64) float64 {
			for q := int64(0); q < p; q++ { // rank q's block for r: its packed place in both
				if at := packed(int64(r), q); at <= i && i < at+cnt(q, int64(r)) {
					return float64(q*1_000_000 + packed(q, int64(r)) + i - at)
				}
			}
			return 0 // past the blocks
		})
	},
	"bruck_alltoall": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		n := param(t, g, "n")
		each(t, g, m, "dst", func(r int, i int64) float64 { return float64((i/n)*1_000_000 + int64(r)*n + i%n) })
	},
	"pipeline_chain": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		each(t, g, m, "data", func(_ int, i int64) float64 { return float64(7*i + 1) })
	},
	"atomic_fanin": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		sum := float64(g.Ranks * (g.Ranks + 1) / 2)
		root := int(param(t, g, "root"))
		each(t, g, m, "total", func(int, int64) float64 { return sum })
		each(t, g, m, "counter", func(r int, _ int64) float64 {
			if r == root {
				return sum
			}
			return 0
		})
	},
	"read_gather": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		root := int(param(t, g, "root"))
		each(t, g, m, "all", func(r int, i int64) float64 {
			if r == root {
				return float64(i)
			}
			return 0
		})
	},
	"notify_scatter": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		n := param(t, g, "n")
		each(t, g, m, "dst", func(r int, e int64) float64 { return float64(int64(r)*n+e) / 2 })
		each(t, g, m, "acc", func(r int, e int64) float64 { return float64(r) + float64(int64(r)*n+e)/2 })
	},
	"binomial_reduce": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		root, p := int(param(t, g, "root")), g.Ranks
		each(t, g, m, "mask", func(r int, _ int64) float64 {
			v := ((r-root)%p + p) % p
			span := p // the root's subtree is everyone
			if v != 0 {
				span = v & -v // lowest set bit: the subtree is v .. v+span-1
			}
			var or uint64
			for w := v; w < v+span && w < p; w++ {
				or |= 1 << ((w + root) % p)
			}
			return float64(or)
		})
	},
	"onesided_allgather": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		n := param(t, g, "n")
		each(t, g, m, "out", func(_ int, i int64) float64 { return float64((i/n)*1000 + i%n) })
		each(t, g, m, "arrived", func(int, int64) float64 { return float64(g.Ranks - 1) })
	},
	"credit_ring": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		p, k := int64(g.Ranks), float64(param(t, g, "m"))
		each(t, g, m, "out", func(r int, i int64) float64 { return float64(((int64(r)+p-1)%p)*1000 + i) })
		each(t, g, m, "head", func(int, int64) float64 { return k })
		each(t, g, m, "credit", func(int, int64) float64 { return k })
	},
	"cas_handoff": func(t *testing.T, g *ir.Graph, m *exec.Memory) {
		each(t, g, m, "owner", func(r int, _ int64) float64 {
			if r == 0 {
				return float64(g.Ranks)
			}
			return 0
		})
		each(t, g, m, "seen", func(r int, _ int64) float64 { return float64(r) })
	},
}

// loadPlan loads plans/NAME.dag for the given world size; ok is false when the plan does not
// allow it (the recursive-doubling allreduce needs a power of two).
func loadPlan(t testing.TB, path string, ranks int, extra ...map[string]int64) (*ir.Graph, bool) {
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	params := map[string]int64{"ranks": int64(ranks)}
	for _, e := range extra {
		for k, v := range e {
			params[k] = v
		}
	}
	g, err := planner.Load(t.Context(), path, src, params, planner.Options{})
	if err != nil {
		if strings.Contains(path, "recursive_doubling") && ranks&(ranks-1) != 0 {
			return nil, false
		}
		require.NoError(t, err, "load %s ranks=%d", path, ranks)
	}
	return g, true
}

// engineCase is one way of running a plan.
type engineCase struct {
	name   string
	engine exec.Engine
	target string // the target the plan is compiled for
	cross  bool   // the software NIC has cross-channel
	trig   bool   // the software NIC offers QP triggers (softnic.Options.Triggers)
}

var engineCases = []engineCase{
	{"poll", exec.Poll, "generic", false, false},
	{"poll-generic", exec.Poll, "generic", true, false},
	{"offload", exec.Offload, "connectx", true, false},
	{"offload-inline", exec.Offload, "connectx-inline", true, false},
	{"poll-generic-triggers", exec.Poll, "generic", false, true},
	{"offload-triggered", exec.Offload, "triggered", false, false},
}

// runCase runs g as c says with schedule seed seed (0: round-robin) and returns the result.
func runCase(t testing.TB, g *ir.Graph, c engineCase, seed uint64, iters int, trace bool) (*exec.Result, *softnic.NIC, *ir.Plan, error) {
	plan, err := compileFor(g, c.target)
	if err != nil {
		return nil, nil, nil, err
	}
	nic := softnic.New(softnic.Options{NoCrossChannel: !c.cross, Seeded: seed != 0, Seed: seed, Trace: trace, Triggers: c.trig})
	res, err := exec.Run(context.Background(), plan, nic, exec.Options{Engine: c.engine, Iters: iters, Seed: seed})
	return res, nic, plan, err
}

func TestPlans(t *testing.T) {
	files, err := filepath.Glob("../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".dag")
		check, ok := expectations[name]
		require.True(t, ok, "plan %s has no expectation in this test: add its known result", name)
		for _, ranks := range []int{1, 2, 3, 4, 8} {
			g, ok := loadPlan(t, f, ranks)
			if !ok {
				continue
			}
			ref, err := exec.Reference(g)
			require.NoError(t, err)
			t.Run(fmt.Sprintf("%s/ranks=%d/reference", name, ranks), func(t *testing.T) { check(t, g, ref) })
			for _, c := range engineCases {
				t.Run(fmt.Sprintf("%s/ranks=%d/%s", name, ranks, c.name), func(t *testing.T) {
					res, _, _, err := runCase(t, g, c, 0, 2, false)
					require.NoError(t, err)
					require.True(t, res.OK, res.Summary())
					check(t, g, res.Memory)
				})
			}
		}
	}
}
