package viz

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

// triggeredChain compiles testdata/onesided/counted_chain.dag at 3 ranks, 2 chunks, for the
// triggered target: rank 1 forwards each chunk when the write of it has landed (a land counter).
func triggeredChain(t *testing.T) *ir.Plan {
	t.Helper()
	const file = "../testdata/onesided/counted_chain.dag"
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), file, src, map[string]int64{"ranks": 3, "c": 2}, planner.Options{})
	require.NoError(t, err)
	tg, err := ir.LookupTarget("triggered")
	require.NoError(t, err)
	p, err := lower.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	return p
}

// The plan view of a triggered plan draws its counters: a node for each counter its work uses,
// the writes that land in a land counter's region going into it, and out of it the work it
// fires, labelled with the threshold, and the CPU's waits.
func TestPlanCounters(t *testing.T) {
	t.Parallel()
	p := triggeredChain(t)
	all := Plan(p, Options{}).String()
	golden(t, "counted_chain.triggered.plan.dot", []byte(all))

	s := Plan(p, Options{Ranks: []int{1}}).String()
	// Node ids are the drawing's own: find the counter nodes by their labels.
	id := func(label string) string {
		m := regexp.MustCompile(`(n\d+)\[[^\]]*label="` + regexp.QuoteMeta(label)).FindStringSubmatch(s)
		require.NotNil(t, m, "no node labelled %q", label)
		return m[1]
	}
	land0, land1 := id("data[0:4].land"), id("data[4:8].land")
	fwd0, got0 := id("[0] RDMA_WRITE"), id("[0] HOST")
	has(t, s, `label="data[0:4].land\nland: landings (remote writes) into data[0:4], +1 per iteration"`)
	// The first chunk is forwarded by the NIC when its write has landed; the CPU waits on the
	// same counter for its host step.
	has(t, s, land0+"->"+fwd0+`[color="#7b3294",fontcolor="#7b3294",fontname="Helvetica",fontsize="9",label="when >= 1"]`)
	has(t, s, land0+"->"+got0+`[color="#7b3294",fontcolor="#7b3294",fontname="Helvetica",fontsize="9",label="CPU waits >= 1",style="dotted"]`)
	// Rank 0's writes land in both regions: from its folded node, one edge into each counter.
	assert.Equal(t, 2, strings.Count(s, `label="lands"`))
	has(t, s, "->"+land1+`[color="#7b3294",fontcolor="#7b3294",fontname="Helvetica",fontsize="9",label="lands",style="dashed"]`)
	// The second chunk waits for a join of its landing and the first chunk's completion.
	has(t, s, `label="when >= 1: += 1"`)
	assert.Equal(t, 2, strings.Count(s, `label="when >= 1: += 1"`))
	// Only counters that some work uses are drawn.
	hasNot(t, s, "up.sq.scnt")

	// A plan for a queue-based target has no counters.
	hasNot(t, Plan(compile(t, ringGraph(3, 2)), Options{}).String(), "counters")
}
