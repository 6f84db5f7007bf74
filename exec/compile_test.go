package exec_test

import (
	"testing"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/planner"
)

func compileFor(g *planner.Graph, target string) (*planner.Plan, error) {
	t, err := planner.LookupTarget(target)
	if err != nil {
		return nil, err
	}
	return planner.Compile(g, t)
}

// mustCompile compiles g for engine e: connectx for the offload engine, generic for the others.
func mustCompile(tb testing.TB, g *planner.Graph, e exec.Engine) *planner.Plan {
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
