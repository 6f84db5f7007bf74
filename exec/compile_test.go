package exec_test

import (
	"context"
	"testing"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/lower"
)

func compileFor(g *ir.Graph, target string) (*ir.Plan, error) {
	t, err := ir.LookupTarget(target)
	if err != nil {
		return nil, err
	}
	return lower.Compile(context.Background(), g, t)
}

// mustCompile compiles g for engine e: connectx for the offload engine, generic for the others.
func mustCompile(tb testing.TB, g *ir.Graph, e exec.Engine) *ir.Plan {
	target := "generic"
	if e == exec.Offload {
		target = "connectx"
	}
	p, err := compileFor(g, target)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
