// Package planner is the front door of the compiler for library users: Load runs the passes
// that turn plan text into a checked ir.Graph, and Compile lowers one for an ir.Target. The
// passes are packages of their own, in pipeline order:
//
//	dsl                 syntax: parse a .dag file
//	planner/elaborate   syntax -> ir.Graph, with the front-end checks (names, shapes, matching)
//	planner/verify      cycles, FIFO deadlocks, races; explanations and suggested fixes
//	planner/prove       postconditions (`expect`): what the plan computes, for every input
//	planner/lower       ir.Graph -> ir.Plan for a target: chains, WAIT/ENABLE, signalling
//
// planner/replay checks a compiled Plan by running it on a model of the NIC. This package only
// strings the passes together; it holds no pass itself.
package planner

import (
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/planner/prove"
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
	errs, order := verify.CheckOrder(g)
	if len(errs) > 0 {
		return g, errs.Err()
	}
	return g, prove.Check(g, order).Err()
}

// Compile lowers a checked Graph for a target into a Plan (lower.Compile).
func Compile(g *ir.Graph, t ir.Target) (*ir.Plan, error) { return lower.Compile(g, t) }

// ParseParams parses `name=value` overrides from the command line (elaborate.ParseParams).
func ParseParams(kvs []string) (map[string]int64, error) { return elaborate.ParseParams(kvs) }
