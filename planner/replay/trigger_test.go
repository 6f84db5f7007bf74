package replay_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/randgraph"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/planner/replay"
)

// trigEntries lists (rank, index) of the triggered work entries that pick accepts.
func trigEntries(p *ir.Plan, pick func(w *ir.TriggeredOp) bool) [][2]int {
	var out [][2]int
	for r := range p.Ranks {
		for k := range p.Ranks[r].Trig.Work {
			if pick(&p.Ranks[r].Trig.Work[k]) {
				out = append(out, [2]int{r, k})
			}
		}
	}
	return out
}

// Corrupting the triggered form of a correct plan must be caught. Each mutation picks its victim
// by the seed, so that over the graphs it hits joins, post counters, host and queue counters.
func TestReplayTriggeredCatchesCorruption(t *testing.T) {
	t.Parallel()
	type mutation struct {
		name  string
		apply func(p *ir.Plan, seed uint64) bool
		want  []string // one of them
		// harmless: seeds whose mutant was examined and is still correct, with the reason.
		harmless map[uint64]string
	}
	isAdd := func(w *ir.TriggeredOp) bool { return w.Kind == ir.TrigAdd }
	dropAdd := func() func(p *ir.Plan, seed uint64) bool {
		return func(p *ir.Plan, seed uint64) bool {
			c := trigEntries(p, isAdd)
			if len(c) == 0 {
				return false
			}
			at := c[seed%uint64(len(c))]
			tr := p.Ranks[at[0]].Trig
			tr.Work = append(tr.Work[:at[1]:at[1]], tr.Work[at[1]+1:]...)
			return true
		}
	}
	muts := []mutation{
		{"drop a counter-add", dropAdd(), []string{"rises by", "blocks forever"}, nil},
		// Lowering the threshold of a counter-add can be harmless (an add into a post counter
		// nothing waits on, a join gate implied by another), so the victims are the ops' triggers.
		{"lower a threshold by one", func(p *ir.Plan, seed uint64) bool {
			c := trigEntries(p, func(w *ir.TriggeredOp) bool { return w.Kind == ir.TrigOp && w.Counter != ir.Untriggered })
			if len(c) == 0 {
				return false
			}
			at := c[seed%uint64(len(c))]
			p.Ranks[at[0]].Trig.Work[at[1]].Threshold--
			return true
		}, []string{"not enforced", "early"}, nil},
		{"swap two ops' counters", func(p *ir.Plan, seed uint64) bool {
			for r := range p.Ranks {
				tr := p.Ranks[r].Trig
				var ops []int
				for k := range tr.Work {
					if w := &tr.Work[k]; w.Kind == ir.TrigOp && w.Counter != ir.Untriggered {
						ops = append(ops, k)
					}
				}
				for i := range ops {
					a := &tr.Work[ops[(i+int(seed))%len(ops)]]
					for _, k := range ops {
						if b := &tr.Work[k]; b.Counter != a.Counter {
							a.Counter, b.Counter = b.Counter, a.Counter
							return true
						}
					}
				}
			}
			return false
		}, []string{"not enforced", "early", "above the", "deadlocks", "blocks forever"},
			map[uint64]string{
				7:  "re1 and re2 of rank 0 are joins of the same two gates (rcnt >= 1, scnt >= 1)",
				31: "rank 0's read re0 now waits for join.se0 >= 1, whose only add it does not gate needs co0, which needs wr0; se0's scnt >= 2 needs re0, hence co0",
			}},
	}
	for _, m := range muts {
		t.Run(m.name, func(t *testing.T) {
			caught, tried := 0, 0
			for _, target := range []string{"triggered", "triggered-sockets"} {
				tg, err := ir.LookupTarget(target)
				require.NoError(t, err)
				for seed := uint64(1); seed <= 80; seed++ {
					g := randgraph.New(seed, randgraph.Config{})
					p, err := lower.Compile(t.Context(), g, tg)
					require.NoError(t, err)
					if !m.apply(p, seed) {
						continue
					}
					tried++
					err = replay.Check(t.Context(), p, replay.Options{})
					if why, ok := m.harmless[seed]; ok {
						assert.NoError(t, err, "%s seed %d: the mutant is correct (%s)", target, seed, why)
						tried--
						continue
					}
					if err == nil {
						t.Errorf("%s seed %d: not caught", target, seed)
						continue
					}
					msg := allMessages(err)
					for _, w := range m.want {
						if strings.Contains(msg, w) {
							caught++
							break
						}
					}
				}
			}
			require.NotZero(t, tried, "no plan had anything to corrupt")
			assert.Equal(t, tried, caught, "corruptions caught with the expected words")
		})
	}
}

// Past Options.TriggeredWork the triggered proof is not run: an op triggered one completion
// early, which the proof catches, then passes, and TriggeredWork says how large the plan is.
func TestReplayTriggeredWorkBound(t *testing.T) {
	t.Parallel()
	tg, err := ir.LookupTarget("triggered")
	require.NoError(t, err)
	for seed := uint64(1); seed <= 80; seed++ {
		p, err := lower.Compile(t.Context(), randgraph.New(seed, randgraph.Config{}), tg)
		require.NoError(t, err)
		c := trigEntries(p, func(w *ir.TriggeredOp) bool {
			return w.Kind == ir.TrigOp && w.Counter != ir.Untriggered && w.Threshold >= 2
		})
		if len(c) == 0 {
			continue
		}
		at := c[seed%uint64(len(c))]
		p.Ranks[at[0]].Trig.Work[at[1]].Threshold--
		n := replay.TriggeredWork(p)
		require.Positive(t, n)
		require.Error(t, replay.Check(t.Context(), p, replay.Options{TriggeredWork: n}), "seed %d: within the bound", seed)
		assert.NoError(t, replay.Check(t.Context(), p, replay.Options{TriggeredWork: n - 1}), "seed %d: past the bound", seed)
		return
	}
	t.Fatal("no plan had a triggered op to corrupt")
}

// A write after a wait for landed writes is triggered on the region's remote-write counter, not
// after the wait's HOST step: the replay proves the edge from the counter's region and threshold
// and the wait's own predecessors, and catches a trigger that no longer waits for the count, one
// on another region's counter, and a counter whose re-arm or region is not what lands.
func TestReplayLandCounters(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../testdata/onesided/counted_chain.dag")
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), "testdata/onesided/counted_chain.dag", src, map[string]int64{"ranks": 3, "c": 2}, planner.Options{})
	require.NoError(t, err)
	fresh := func() (*ir.Plan, *ir.Triggered, map[string]int) {
		p := compile(t, g, "triggered")
		tr := p.Ranks[1].Trig
		byName := map[string]int{}
		for i, c := range tr.Counters {
			byName[c.Name] = i
		}
		return p, tr, byName
	}
	p, _, _ := fresh()
	require.NoError(t, replay.Check(t.Context(), p, replay.Options{}))
	fwd0 := func(tr *ir.Triggered) *ir.TriggeredOp {
		for k := range tr.Work {
			if w := &tr.Work[k]; w.Name == "fwd[0]" && w.Kind == ir.TrigOp {
				return w
			}
		}
		t.Fatal("rank 1 has no fwd[0]")
		return nil
	}
	for _, m := range []struct {
		name  string
		apply func(tr *ir.Triggered, byName map[string]int)
		want  string
	}{
		{"posted at once", func(tr *ir.Triggered, _ map[string]int) { fwd0(tr).Counter = ir.Untriggered },
			"edge got[0] on rank 1 -> fwd[0] is not enforced"},
		{"on the other chunk's counter", func(tr *ir.Triggered, byName map[string]int) { fwd0(tr).Counter = byName["data[4:8].land"] },
			"edge got[0] on rank 1 -> fwd[0] is not enforced"},
		{"re-armed by two", func(tr *ir.Triggered, byName map[string]int) { tr.Counters[byName["data[0:4].land"]].PerIteration = 2 },
			"counter data[0:4].land re-arms by 2 per iteration, but 1 writes land in data[0:4]"},
		{"counting the whole buffer", func(tr *ir.Triggered, byName map[string]int) {
			c := &tr.Counters[byName["data[0:4].land"]]
			c.Region.Len, c.PerIteration = 8, 2
			fwd0(tr).Threshold = 2
		}, "edge got[0] on rank 1 -> fwd[0] is not enforced"},
	} {
		t.Run(m.name, func(t *testing.T) {
			p, tr, byName := fresh()
			m.apply(tr, byName)
			err := replay.Check(t.Context(), p, replay.Options{})
			require.Error(t, err)
			assert.Contains(t, allMessages(err), m.want)
		})
	}
}
