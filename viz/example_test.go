package viz_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/viz"
)

// Draw a library plan as `coredag dot` does: the graph view (one node per op, a cluster per
// rank) as DOT text, and the plan view (one lane per work queue, one node per chain entry)
// rendered to SVG in process, with no system Graphviz.
func ExampleGraph() {
	src, err := os.ReadFile("../plans/dissemination_barrier.dag")
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := planner.Load("dissemination_barrier.dag", src, map[string]int64{"ranks": 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	d := viz.Graph(g, viz.Options{})
	text := d.String()
	fmt.Println("graph view is DOT:", strings.HasPrefix(text, "digraph"))

	target, _ := planner.LookupTarget("connectx")
	plan, err := planner.Compile(g, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	var svg bytes.Buffer
	if err := viz.Write(viz.Plan(plan, viz.Options{}), viz.SVG, &svg); err != nil {
		fmt.Println(err)
		return
	}
	entries := 0
	for _, r := range plan.Ranks {
		for _, q := range r.Queues {
			entries += len(q.Chain)
		}
	}
	fmt.Println("plan view is SVG:", strings.Contains(svg.String(), "<svg"))
	fmt.Printf("%d SVG nodes for %d chain entries\n", strings.Count(svg.String(), `class="node"`), entries)
	// Output:
	// graph view is DOT: true
	// plan view is SVG: true
	// 12 SVG nodes for 12 chain entries
}
