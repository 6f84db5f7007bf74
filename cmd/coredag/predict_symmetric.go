package main

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/msccl"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/predict"
)

// symmetricAbove is the size of a plan (its ops over all ranks) above which --model auto
// simulates a symmetric plan on one rank: op by op, a million ops take seconds of CPU and a
// gigabyte to check, compile and simulate.
const symmetricAbove = 1 << 20

// prepareSymmetric folds the plan onto one rank (predict.Fold) and compiles that, with
// --model symmetric, or with auto when the plan has more than symmetricAbove ops and its
// sampled ranks are rank 0 moved. It returns nil and no error when the plan is to be simulated
// op by op (auto), with a note on stderr when that is for want of symmetry.
func (c *predictCmd) prepareSymmetric(e *env, path string, tg ir.Target, par predict.Params) (*sizedPlan, error) {
	forced := c.Model == "symmetric"
	switch {
	case forced && c.Measure:
		return nil, usageError("--measure runs every rank of the plan: use it with --model ops (or auto)")
	case forced && par.Workers > 0:
		return nil, usageError("--model symmetric: the figures share %s between all the ranks (workers), so the ranks are not alike: use --model ops", english.Plural(par.Workers, "worker"))
	case forced && c.Samples < 1:
		return nil, usageError("--samples %d: compare at least one rank with rank 0", c.Samples)
	case !forced && (c.Measure || path == "-" || c.Samples < 1 || planner.IsMSCCL(path)):
		return nil, nil // op by op: --measure runs the whole plan, stdin is read once, MSCCL is small
	}
	params, err := c.values()
	if err != nil {
		return nil, err
	}
	b, err := c.budget()
	if err != nil {
		return nil, err
	}
	src, err := readSource(e, path)
	if err != nil {
		return nil, err
	}
	f, err := planner.Parse(path, src, msccl.Options{Elem: c.Type})
	if err != nil {
		if !forced {
			return nil, nil // the op-by-op path reports it, as check does
		}
		return nil, fmt.Errorf("%v", err)
	}
	if err := elaborate.CheckParams(f, params); err != nil {
		return nil, usageError("%s: %v", path, err)
	}
	if err := elaborate.CheckParams(f, map[string]int64{c.SizeParam: 1}); err != nil {
		return nil, usageError("%s: the plan has no param %q to set the size with (--size-param)", path, c.SizeParam)
	}
	at := func(n int64, ranks []int) (*elaborate.Sample, error) {
		ps := maps.Clone(params)
		if ps == nil {
			ps = map[string]int64{}
		}
		ps[c.SizeParam] = n
		// A signal stops it (e.ctx): the caller reports the interruption.
		return elaborate.ElaborateRanks(e.ctx, f, ps, ranks, elaborate.Within(b))
	}
	// A mistake on a rank elaborated is the plan's, whatever the model: reported as check
	// reports it (the op-by-op path, on a large plan, would stop at the op limit first), and so
	// is a refusal of the memory budget.
	failed := func(err error) error {
		if cause := stop.Stopped(e.ctx, err); cause != nil {
			return cause
		}
		if errors.As(err, new(diag.List)) {
			reportDiagnostics(e, &loaded{path: path, src: src, err: err}, false)
			return &exitError{code: exitFail}
		}
		if r := refusal(path, err); r != nil {
			return r
		}
		return fmt.Errorf("%s: %v", path, err)
	}
	s0, err := at(1, []int{0})
	if err != nil {
		return nil, failed(err)
	}
	world := s0.Graph.Ranks
	if !forced {
		sp := s0.Graph.Rank[0]
		if int64(sp.EndOp-sp.FirstOp)*int64(world) <= symmetricAbove {
			return nil, nil
		}
		if par.Workers > 0 {
			fmt.Fprintf(e.stderr, "coredag: note: %s: simulated op by op: the figures share workers between the ranks, which the symmetric model cannot\n", path)
			return nil, nil
		}
	}
	sampled := predict.SampleRanks(world, c.Samples)
	s1, err := at(1, sampled)
	if err != nil {
		return nil, failed(err)
	}
	g1, sym, err := predict.Fold(predict.RankSample{Graph: s1.Graph, Ranks: s1.Ranks, PeerNames: s1.PeerNames})
	if err != nil {
		if forced {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		fmt.Fprintf(e.stderr, "coredag: note: %s: simulated op by op: %v\n", path, strings.TrimPrefix(err.Error(), "predict: "))
		return nil, nil
	}
	s2, err := at(2, []int{0})
	if err != nil {
		return nil, failed(err)
	}
	g2, _, err := predict.Fold(predict.RankSample{Graph: s2.Graph, Ranks: s2.Ranks, PeerNames: s2.PeerNames})
	if err != nil {
		return nil, fmt.Errorf("%s: at %s = 2: %v", path, c.SizeParam, err)
	}
	if ok, why := predict.Linear(g1, g2, 2); !ok {
		return nil, usageError("%s: the message size is not linear in %s: %s", path, c.SizeParam, why)
	}
	sp := &sizedPlan{name: g1.Name, model: symmetricModel(sym)}
	if v, ok := params[c.SizeParam]; ok {
		sp.param = v
	}
	sp.at = func(int64) (*ir.Graph, error) {
		return nil, fmt.Errorf("the symmetric model has no whole plan to run")
	}
	if sp.unit, err = g1.MessageBytes(); err != nil {
		return nil, usageError("%s: %v", path, err)
	}
	if sp.plan, err = lower.Compile(e.ctx, g1, tg); err != nil {
		return nil, fmt.Errorf("%s: compile rank 0 for %s: %v", path, tg.Name, err)
	}
	return sp, nil
}

// symmetricModel says how a folded plan was simulated and what was assumed.
func symmetricModel(s predict.Symmetry) string {
	w := fmt.Sprintf("symmetric under %s, rank 0 simulated for all %d ranks", s.Group, s.Ranks)
	if s.Complete() {
		return w + "; every other rank was elaborated and found to be rank 0 moved; the plan was not checked (coredag check) at this world size"
	}
	ranks := make([]string, len(s.Checked))
	for i, r := range s.Checked {
		ranks[i] = fmt.Sprint(r)
	}
	return fmt.Sprintf("%s; ranks %s (%d of %d) were elaborated and found to be rank 0 moved, the others are assumed to be; the plan was not checked (coredag check) at this world size",
		w, strings.Join(ranks, ", "), len(s.Checked), s.Ranks-1)
}
