package coredag

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planset"
)

// Set is a checked plan set (docs/predict.md, Plan sets): which plan of a collective serves
// which message size and world size. OpenSet reads one; Set.Open opens the plan a size and a
// world size select, as Open opens a plan.
type Set struct {
	set *planset.Set
}

// OpenSet reads and checks a plan set file: every plan is loaded at the least world size it
// serves and must expect the set's collective, and the sizes and world sizes must be covered
// without gap or overlap. A set that fails is a *CheckError with the positions.
func OpenSet(path string) (s *Set, err error) {
	defer recoverInto(&err)
	if strings.HasSuffix(path, ".dag") || strings.HasSuffix(path, ".xml") {
		return nil, fmt.Errorf("%w: %s is a plan, not a plan set: open it with Open (from C, coredag_plan_open)", ErrArg, path)
	}
	b, err := budget.Resolve(budget.Env, "", os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrArg, err)
	}
	ps, _, err := planset.Load(context.Background(), path, planner.SetPlanExpects(planner.Options{Elaborate: elaborate.Within(b)}))
	if err != nil {
		var l diag.List
		if errors.As(err, &l) {
			return nil, &CheckError{diags: l}
		}
		return nil, fmt.Errorf("%w: %v", ErrArg, err)
	}
	return &Set{set: ps}, nil
}

// Collective is the collective the set's plans compute ("allreduce", ...).
func (s *Set) Collective() string {
	if s == nil || s.set == nil {
		return ""
	}
	return s.set.Collective.String()
}

// Select returns the plan file that serves a message of size bytes on ranks ranks, the params
// its line sets, and why it was chosen; an error (ErrArg) when the set serves no such world size.
func (s *Set) Select(size int64, ranks int) (file string, params map[string]int64, why string, err error) {
	defer recoverInto(&err)
	ch, err := s.set.Select(size, int64(ranks))
	if err != nil {
		return "", nil, "", fmt.Errorf("%w: %v", ErrArg, err)
	}
	params, err = elaborate.ParseParams(ch.Entry.Params)
	if err != nil {
		return "", nil, "", fmt.Errorf("%w: %v", ErrArg, err)
	}
	return ch.Entry.File, params, ch.Why, nil
}

// Open opens the plan that serves a message of size bytes on ranks ranks, with the params of
// its line, ranks, and opts.Params (which win). When neither the line nor opts.Params sets the
// set's size param (n, unless the set has a `size-param` line), Open sets it so that the plan's
// message, the bytes of the buffer its expect names, is size bytes: an allreduce plan whose
// data is f32[n] gets n = size / 4, one whose data is f32[ranks * n] on 4 ranks n = size / 16.
// The message must grow in proportion to the param, and size must be a multiple of what one
// unit of it moves; otherwise Open fails with ErrArg and says the multiple, so that the caller
// can pad its message or set the param itself. A plan without the param opens as it is.
func (s *Set) Open(size int64, ranks int, opts Options) (p *Plan, err error) {
	defer recoverInto(&err)
	file, params, _, err := s.Select(size, ranks)
	if err != nil {
		return nil, err
	}
	params["ranks"] = int64(ranks)
	maps.Copy(params, opts.Params)
	src, err := dsl.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrArg, err)
	}
	sp := s.set.SizeParam
	_, given := params[sp]
	derived := false
	if !given {
		b, err := opts.budget()
		if err != nil {
			return nil, err
		}
		n, ok, err := planner.SizeParam(context.Background(), file, src, sp, size, params, elaborate.Within(b))
		var l diag.List
		switch {
		case errors.As(err, &l):
			return nil, &CheckError{diags: l}
		case err != nil:
			return nil, fmt.Errorf("%w: %v; or set %s in the params", ErrArg, err, sp)
		case ok:
			params[sp], derived = n, true
		}
	}
	opts.Params = params
	p, err = OpenSource(file, src, opts)
	if err != nil || !derived {
		return p, err
	}
	if got, _ := p.graph.MessageBytes(); got != size {
		p.Close()
		return nil, fmt.Errorf("%w: %s: at %s = %d its message is %d B, not %d B: it does not grow in proportion to %s; set %s in the params",
			ErrArg, file, sp, params[sp], got, size, sp, sp)
	}
	return p, nil
}
