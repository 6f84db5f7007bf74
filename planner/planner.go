// Package planner is the front door of the compiler for library users: Load runs the passes
// that turn plan text into a checked ir.Graph, and Compile lowers one for an ir.Target. The
// passes are packages of their own, in pipeline order:
//
//	dsl                 syntax: parse a .dag file
//	msccl               or read an MSCCL-IR .xml algorithm as the same syntax
//	planner/elaborate   syntax -> ir.Graph, with the front-end checks (names, shapes, matching)
//	planner/verify      cycles, FIFO deadlocks, races; explanations and suggested fixes
//	planner/prove       postconditions (`expect`): what the plan computes, for every input
//	planner/lower       ir.Graph -> ir.Plan for a target: chains, WAIT/ENABLE, signalling
//
// planner/replay checks a compiled Plan by running it on a model of the NIC. This package only
// strings the passes together; it holds no pass itself.
//
// Load, Compile and every pass take a context.Context as their first parameter, as package
// context asks, and no options carry one. The passes look at it between their steps and every
// millisecond or so within their long ones (internal/stop); once it is cancelled they stop and
// return its cause (context.Cause), or a result the caller must not use (Load does not). Load
// hands its ctx to each pass it runs, so no pass can be stopped by a context Load does not watch.
// A ctx must not be nil: a caller with nothing to cancel passes context.Background().
package planner

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/msccl"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/planner/prove"
	"github.com/coredag/coredag/planner/verify"
)

// Options are the settings of Load beyond the params: one options value per pass, and hooks.
// The zero value is what coredag check does without flags.
type Options struct {
	Elaborate elaborate.Options // limits and the memory budget
	MSCCL     msccl.Options     // how an .xml algorithm becomes a plan
	Prove     prove.Options     // the memory budget of the proof of the postconditions
	// Verify is how the checks split their work, and the ordering of the target the races are
	// proven under (verify.Options.Order).
	Verify verify.Options

	// Lint, when set, is given the warnings of the lints (verify.RNR) of a plan that passes,
	// which run beside the checks on their happens-before graph.
	Lint func(diag.List)

	// Beside, when set, is run on the Graph of a plan free of deadlocks at the same time as the
	// rest of the checks (races, the proof, the lints), for work that needs only such a Graph,
	// like lower.CheckLimits: done while the checks keep the other cores busy, not after them.
	// Load returns once Beside has. Beside's ctx derives from Load's; if a later check fails,
	// Beside's work was for nothing: ctx is then cancelled, so that Beside can stop early.
	Beside func(ctx context.Context, g *ir.Graph)
}

// Within returns the options of a command run within the memory budget b: elaboration caps
// the plan's ops and checks the Graph's arrays against b (elaborate.Within), and the proofs
// keep their values within their share of it (prove.Options).
func Within(b budget.Budget) Options {
	return Options{Elaborate: elaborate.Within(b), Prove: prove.Options{Budget: b}}
}

// IsMSCCL reports whether filename names an MSCCL-IR algorithm (an .xml file) rather than a
// .dag plan.
func IsMSCCL(filename string) bool { return strings.EqualFold(filepath.Ext(filename), ".xml") }

// Parse parses a plan: a .dag file, or an MSCCL-IR .xml algorithm converted to the same syntax
// (msccl.Convert), with positions in the XML.
func Parse(filename string, src []byte, opt msccl.Options) (*dsl.File, error) {
	if IsMSCCL(filename) {
		return msccl.Convert(filename, src, opt)
	}
	return dsl.Parse(filename, src)
}

// Load parses, elaborates and checks a plan: the front half of every coredag command. The error,
// if any, is a diag.List of positioned diagnostics, a *ParamError when params holds an override
// the plan cannot take, or a *budget.Error when the plan would not fit in opt's memory budget.
// When only verification failed, the Graph is returned too, so a caller can explain the failure
// (SuggestFixes). Once ctx is cancelled, Load stops within moments and returns ctx's cause and
// no Graph: the passes look at ctx between their steps and within their long ones
// (elaboration, the checks, the proof).
func Load(ctx context.Context, filename string, src []byte, params map[string]int64, opt Options) (g *ir.Graph, err error) {
	if _, ok := params["ranks"]; ok && IsMSCCL(filename) {
		return nil, &elaborate.ParamError{Msg: "ranks: an MSCCL algorithm runs on the ngpus GPUs its XML lists, and sets no other world size; of the params only chunk (elements per chunk) applies"}
	}
	f, err := Parse(filename, src, opt.MSCCL)
	if err != nil {
		return nil, err
	}
	if err := elaborate.CheckParams(f, params); err != nil {
		return nil, err
	}
	g, err = elaborate.Elaborate(ctx, f, params, opt.Elaborate)
	if err != nil {
		return nil, err
	}
	// A stopped check returns what it had found (nothing, or part of it), which means nothing:
	// the context is looked at after each step, before its result is used.
	errs, order := opt.Verify.CheckDeadlocks(ctx, g)
	if err := stop.Cause(ctx); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return g, errs.Err()
	}
	if opt.Beside != nil {
		wait := startBeside(ctx, g, opt.Beside)
		defer func() {
			wait(err != nil)
			// Stopped after the checks, Beside's work may have been cut short: the caller
			// must not take it for done.
			if cause := stop.Cause(ctx); err == nil && cause != nil {
				g, err = nil, cause
			}
		}()
	}
	// The race search, the proof of the postconditions and the lints all read the Graph and the
	// order only: they run side by side (checkOrder).
	errs, proved, lints := checkOrder(ctx, g, order, opt)
	if err := stop.Cause(ctx); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return g, errs.Err()
	}
	if ordered := order.Ordered(); ordered != nil {
		// Race-free only under the target's ordering, which may order the events otherwise:
		// the proof replays them in an order that agrees with it.
		proved = prove.Check(ctx, g, ordered, opt.Prove)
		g.Relies = order.Relied(ctx) // what a runtime must find its transport grants
		if d := order.Reliance(ctx); d != nil {
			lints = append(diag.List{d}, lints...)
		}
		if err := stop.Cause(ctx); err != nil {
			return nil, err
		}
	}
	if len(proved) == 0 && opt.Lint != nil {
		opt.Lint(lints)
	}
	return g, proved.Err()
}

// Compile lowers a checked Graph for a target into a Plan (lower.Compile); ctx stops it.
func Compile(ctx context.Context, g *ir.Graph, t ir.Target) (*ir.Plan, error) {
	return lower.Compile(ctx, g, t)
}

// ParseParams parses `name=value` overrides from the command line (elaborate.ParseParams).
func ParseParams(kvs []string) (map[string]int64, error) { return elaborate.ParseParams(kvs) }
