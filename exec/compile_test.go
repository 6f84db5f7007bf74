package exec_test

import (
	"testing"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/planner"
)

// haveCompiler reports whether planner.Compile is available to the tests.
const haveCompiler = true

func compileFor(g *planner.Graph, target string) (*planner.Plan, error) {
	t, err := planner.LookupTarget(target)
	if err != nil {
		return nil, err
	}
	return planner.Compile(g, t)
}

func mustCompile(tb testing.TB, g *planner.Graph, e exec.Engine) *planner.Plan {
	if e != exec.Offload {
		return nil
	}
	p, err := compileFor(g, "connectx")
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
