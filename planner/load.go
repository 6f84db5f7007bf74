// Package planner turns a parsed plan into something a NIC can run. Elaborate evaluates the SPMD
// text for every rank into an ir.Graph (ranks, buffers, queues, ops, dependency edges, all with
// source positions); Check verifies it (matching, bounds, cycles, FIFO deadlocks, races); Compile
// lowers it for an ir.Target into an ir.Plan: per-queue WQE chains with WAIT/ENABLE entries and
// signalling.
package planner

import (
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planner/verify"
)

// Load parses, elaborates and checks a plan: the front half of every coredag command.
// The error, if any, is a diag.List of positioned diagnostics, or a *ParamError when params
// holds an override the plan cannot take. When only verification failed, the Graph is returned
// too, so a caller can explain the failure (SuggestFixes).
func Load(filename string, src []byte, params map[string]int64) (*ir.Graph, error) {
	return LoadLimited(filename, src, params, elaborate.Limits{})
}

// LoadLimited is Load within lim.
func LoadLimited(filename string, src []byte, params map[string]int64, lim elaborate.Limits) (*ir.Graph, error) {
	f, err := dsl.Parse(filename, src)
	if err != nil {
		return nil, err
	}
	if err := elaborate.CheckParams(f, params); err != nil {
		return nil, err
	}
	g, err := elaborate.ElaborateLimited(f, params, lim)
	if err != nil {
		return nil, err
	}
	return g, verify.Check(g).Err()
}
