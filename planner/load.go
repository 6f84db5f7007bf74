package planner

// Check runs the verification phase over an elaborated Graph: cycles, FIFO deadlocks and races.
func Check(g *Graph) error {
	return Verify(g).Err()
}

// Load parses, elaborates and checks a plan: the front half of every coredag command.
// The error, if any, is a diag.List of positioned diagnostics, or a *ParamError when params
// holds an override the plan cannot take. When only verification failed, the Graph is returned
// too, so a caller can explain the failure (SuggestFixes).
func Load(filename string, src []byte, params map[string]int64) (*Graph, error) {
	return LoadLimited(filename, src, params, Limits{})
}
