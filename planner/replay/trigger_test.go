package replay_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/randgraph"
	"github.com/coredag/coredag/ir"
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
					p, err := lower.Compile(g, tg)
					require.NoError(t, err)
					if !m.apply(p, seed) {
						continue
					}
					tried++
					err = replay.Check(p, replay.Options{})
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
		p, err := lower.Compile(randgraph.New(seed, randgraph.Config{}), tg)
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
		require.Error(t, replay.Check(p, replay.Options{TriggeredWork: n}), "seed %d: within the bound", seed)
		assert.NoError(t, replay.Check(p, replay.Options{TriggeredWork: n - 1}), "seed %d: past the bound", seed)
		return
	}
	t.Fatal("no plan had a triggered op to corrupt")
}
