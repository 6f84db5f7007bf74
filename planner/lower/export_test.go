package lower

import (
	"context"

	"github.com/coredag/coredag/ir"
)

// EventOrder is the event order of Compile, and its critical path, for benchmarks.
func EventOrder(g *ir.Graph, t ir.Target) ([]int32, int, error) {
	c := &compiler{g: g, t: t, plan: &ir.Plan{Graph: g, Target: t}}
	return c.eventOrder(context.Background(), true)
}
