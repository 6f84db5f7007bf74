package exec_test

import (
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
