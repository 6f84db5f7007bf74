package viz_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/viz"
)

// Draw a library plan as `coredag dot` does: the graph view (one node per op, a cluster per
// rank) as DOT text.
func ExampleGraph() {
	src, err := os.ReadFile("../plans/dissemination_barrier.dag")
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := planner.Load(context.Background(), "dissemination_barrier.dag", src, map[string]int64{"ranks": 2}, planner.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	text := viz.Graph(g, viz.Options{}).String()
	fmt.Println("graph view is DOT:", strings.HasPrefix(text, "digraph"))
	fmt.Println("rank clusters:", strings.Count(text, `label="rank `))
	// Output:
	// graph view is DOT: true
	// rank clusters: 2
}

// Render the plan view (one lane per work queue, one node per chain entry) to SVG. Write runs
// Graphviz's dot program, from PATH or $COREDAG_DOT, and returns an error if there is none.
func ExampleWrite() {
	src, err := os.ReadFile("../plans/dissemination_barrier.dag")
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := planner.Load(context.Background(), "dissemination_barrier.dag", src, map[string]int64{"ranks": 2}, planner.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	target, _ := ir.LookupTarget("connectx")
	plan, err := lower.Compile(context.Background(), g, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	var svg bytes.Buffer
	if err := viz.Write(viz.Plan(plan, viz.Options{}), viz.SVG, &svg); err != nil {
		fmt.Println(err) // e.g. Graphviz is not installed
		return
	}
	fmt.Println("SVG nodes:", strings.Count(svg.String(), `class="node"`))
}
