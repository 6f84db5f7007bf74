package exec_test

import (
	"errors"

	"github.com/coredag/coredag/planner"
)

// haveCompiler reports whether planner.Compile is available to the tests.
const haveCompiler = false

func compileFor(g *planner.Graph, target string) (*planner.Plan, error) {
	return nil, errors.New("no compiler yet")
}
