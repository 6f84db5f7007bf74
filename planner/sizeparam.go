package planner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/msccl"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planset"
)

// SetPlanExpects returns a planset.Checker: it loads a set's plan file (at most dsl.MaxSource)
// with its line's params at a world size, checked as Load checks it under opts and its ctx, and
// returns its postconditions. A plan set (planset.IsSet) is refused: sets do not nest.
func SetPlanExpects(opts Options) func(ctx context.Context, path string, ranks int64, params []string) ([]ir.Expect, error) {
	return func(ctx context.Context, path string, ranks int64, params []string) ([]ir.Expect, error) {
		ps, err := elaborate.ParseParams(params)
		if err != nil {
			return nil, err
		}
		ps["ranks"] = ranks
		src, err := dsl.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if planset.IsSet(path, src) { // else the set's language gets the plan's errors on every line
			return nil, errors.New(planset.NestedSet(path))
		}
		g, err := Load(ctx, path, src, ps, opts)
		if err != nil {
			return nil, err
		}
		return g.Expects, nil
	}
}

// SizeParam works out the value of param sp at which the plan in filename moves a message of
// size bytes on one rank (ir.Graph.MessageBytes), its other params as given. The plan is
// elaborated at sp = v and 2v for the least power of two v at which both elaborate (a plan may
// assert that sp is a multiple of something), and its message must double from one to the
// other. It reports false when the plan declares no param sp. The error says what does not fit:
// a message that does not grow in proportion to sp, or a size that is not a multiple of one
// unit's bytes (with the size to pad to). Parse errors are a diag.List. Once ctx is cancelled,
// the error is its cause (context.Cause).
func SizeParam(ctx context.Context, filename string, src []byte, sp string, size int64, params map[string]int64, opt elaborate.Options) (int64, bool, error) {
	f, err := Parse(filename, src, msccl.Options{})
	if err != nil {
		return 0, false, err
	}
	if elaborate.CheckParams(f, map[string]int64{sp: 1}) != nil {
		return 0, false, nil
	}
	at := func(n int64) (int64, error) {
		ps := make(map[string]int64, len(params)+1)
		maps.Copy(ps, params)
		ps[sp] = n
		g, err := elaborate.Elaborate(ctx, f, ps, opt)
		if err != nil {
			if cause := stop.Stopped(ctx, err); cause != nil {
				return 0, cause
			}
			first, _, _ := strings.Cut(err.Error(), "\n")
			return 0, fmt.Errorf("%s: working out %s for a message of %d B, at %s = %d: %s", filename, sp, size, sp, n, first)
		}
		return g.MessageBytes()
	}
	// Each value is elaborated once: the message at 2v is the next round's message at v.
	v := int64(1)
	one, oneErr := at(v)
	var two int64
	firstErr := oneErr
	for ; v <= maxSizeProbe; v *= 2 {
		if err := stop.Cause(ctx); err != nil {
			return 0, false, err
		}
		var twoErr error
		two, twoErr = at(2 * v)
		if oneErr == nil && twoErr == nil {
			break
		}
		if firstErr == nil {
			firstErr = twoErr
		}
		one, oneErr = two, twoErr
	}
	if v > maxSizeProbe {
		return 0, false, firstErr
	}
	unit := one / v
	switch {
	case one <= 0 || one%v != 0 || two != 2*one:
		return 0, false, fmt.Errorf("%s: its message (%d B at %s = %d, %d B at %s = %d) does not grow in proportion to %s", filename, one, sp, v, two, sp, 2*v, sp)
	case size < unit || size%unit != 0:
		pad := "no multiple of it that large is a size"
		if q := size / unit; q+1 <= math.MaxInt64/unit {
			pad = fmt.Sprintf("pad it to %d B", (q+1)*unit)
		}
		what := "is not a multiple of it" // 0 B is one, but it would set sp to 0, never probed
		if size == 0 {
			what = "holds no unit of it"
		}
		return 0, false, fmt.Errorf("%s moves %d B per unit of %s with these params (ranks %d): a message of %d B %s; %s",
			filename, unit, sp, params["ranks"], size, what, pad)
	}
	return size / unit, true, nil
}

// maxSizeProbe is the largest value SizeParam tries its param at.
const maxSizeProbe = 1 << 30
