package predict

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// Sample is one measurement to fit the figures to: a compiled plan, the scale it ran at
// (Options.Scale) and its measured time of one iteration in nanoseconds.
type Sample struct {
	Name     string
	Plan     *ir.Plan
	Scale    float64
	Measured float64
}

// FitFigures are the figures Fit may set, by their JSON names.
// (cache_bytes is not among them: the model is not linear in it; FitCache searches it.)
var FitFigures = []string{"L_ns", "o_ns", "G_ns_per_byte", "post_ns", "poll_ns", "ctrl_ns", "cq_ns", "imm_ns", "host_ns", "reduce_ns_per_byte", "copy_ns_per_byte", "mem_ns_per_byte"}

// Fit sets the figures named in free (FitFigures' names) so that the model's predictions of the
// samples come closest to their measurements in relative terms (least squares of the relative
// errors, every figure >= 0); base gives the other figures and the worker count. It takes each
// figure's share of a sample's time from a simulation with that figure alone at 1, which is
// exact when the plan's work is serialised (one shared worker) and an estimate otherwise; Fit
// then checks the fitted figures by simulating every sample again and returns the relative
// errors (predicted / measured - 1), in sample order. Where latencies overlap with work (L_ns,
// cq_ns) it refines the solution by Gauss-Newton steps on the model's slopes. Once ctx is
// cancelled, the simulations stop and Fit returns ctx's cause.
func Fit(ctx context.Context, samples []Sample, base Params, free []string) (Params, []float64, error) {
	return fit(ctx, samples, base, free, true)
}

// fit is Fit, with the Gauss-Newton steps only if refine.
func fit(ctx context.Context, samples []Sample, base Params, free []string, refine bool) (Params, []float64, error) {
	if len(samples) == 0 {
		return base, nil, fmt.Errorf("fit: no samples")
	}
	idx := map[string]int{}
	for i, f := range base.fields() {
		idx[f.name] = i
	}
	for _, n := range free {
		if _, ok := idx[n]; !ok {
			return base, nil, fmt.Errorf("fit: no figure %q", n)
		}
	}
	// simulate is the time of sample s under par; its error names the sample, unless it is
	// ctx's cause.
	simulate := func(s Sample, par Params) (float64, error) {
		r, err := Simulate(ctx, s.Plan, par, Options{Scale: s.Scale})
		if cause := stop.Stopped(ctx, err); cause != nil {
			return 0, cause
		}
		if err != nil {
			return 0, fmt.Errorf("fit: %s: %v", s.Name, err)
		}
		return r.Time, nil
	}
	// the part of each sample the fixed figures explain, and each free figure's coefficient
	fixed := base
	for _, n := range free {
		*fixed.fields()[idx[n]].v = 0
	}
	rest := make([]float64, len(samples))
	coef := make([][]float64, len(samples))
	for i, s := range samples {
		if s.Measured <= 0 {
			return base, nil, fmt.Errorf("fit: sample %s measured %v ns", s.Name, s.Measured)
		}
		var err error
		if rest[i], err = simulate(s, fixed); err != nil {
			return base, nil, err
		}
		coef[i] = make([]float64, len(free))
		for j, n := range free {
			u := Params{Workers: base.Workers, CacheBytes: base.CacheBytes}
			*u.fields()[idx[n]].v = 1
			if coef[i][j], err = simulate(s, u); err != nil {
				return base, nil, err
			}
		}
	}
	// relative least squares: row i of A is coef[i] / m_i, b_i = 1 - rest_i / m_i
	solve := func(coef [][]float64, rest []float64) []float64 {
		a := make([][]float64, len(samples))
		b := make([]float64, len(samples))
		for i, s := range samples {
			a[i] = make([]float64, len(free))
			for j := range free {
				a[i][j] = coef[i][j] / s.Measured
			}
			b[i] = 1 - rest[i]/s.Measured
		}
		return nnls(a, b)
	}
	with := func(x []float64) Params {
		out := base
		for j, n := range free {
			*out.fields()[idx[n]].v = x[j]
		}
		return out
	}
	times := func(par Params) ([]float64, error) {
		ts := make([]float64, len(samples))
		for i, s := range samples {
			var err error
			if ts[i], err = simulate(s, par); err != nil {
				return nil, err
			}
		}
		return ts, nil
	}
	score := func(ts []float64) float64 {
		var q float64
		for i, s := range samples {
			q += (ts[i]/s.Measured - 1) * (ts[i]/s.Measured - 1)
		}
		return q
	}
	x := solve(coef, rest)
	ts, err := times(with(x))
	if err != nil {
		return base, nil, err
	}
	best := score(ts)
	// Each figure's coefficient above is its time alone; with the others in, a latency partly
	// overlaps with work, and the model's time is piecewise linear in the figures. Gauss-Newton
	// steps refit on the slopes at the solution (one-sided differences, exact on its piece) while
	// the error falls.
	for i := 0; refine && i < 8; i++ {
		slope := make([][]float64, len(samples))
		for i := range samples {
			slope[i] = make([]float64, len(free))
		}
		for j := range free {
			y := slices.Clone(x)
			h := max(x[j]*1e-3, 1e-6)
			y[j] += h
			ty, err := times(with(y))
			if err != nil {
				return base, nil, err
			}
			for i := range samples {
				slope[i][j] = (ty[i] - ts[i]) / h
			}
		}
		lin := make([]float64, len(samples))
		for i := range samples {
			lin[i] = ts[i]
			for j := range free {
				lin[i] -= slope[i][j] * x[j]
			}
		}
		nx := solve(slope, lin)
		nts, err := times(with(nx))
		if err != nil {
			return base, nil, err
		}
		q := score(nts)
		if !(q < best*(1-1e-6)) {
			break
		}
		x, ts, best = nx, nts, q
	}
	out := with(x)
	errs := make([]float64, len(samples))
	for i, s := range samples {
		errs[i] = ts[i]/s.Measured - 1
	}
	return out, errs, nil
}

// nnls minimises |A x - b|² over x >= 0 by cyclic coordinate descent on the normal equations,
// which converges for these small, well-scaled problems (a handful of figures).
func nnls(a [][]float64, b []float64) []float64 {
	n := 0
	if len(a) > 0 {
		n = len(a[0])
	}
	// normal equations: Q = AᵀA, c = Aᵀb
	q := make([][]float64, n)
	c := make([]float64, n)
	for j := range n {
		q[j] = make([]float64, n)
		for k := range n {
			for i := range a {
				q[j][k] += a[i][j] * a[i][k]
			}
		}
		for i := range a {
			c[j] += a[i][j] * b[i]
		}
	}
	x := make([]float64, n)
	for range 20000 {
		moved := 0.0
		for j := range n {
			if q[j][j] == 0 {
				continue
			}
			g := c[j]
			for k := range n {
				if k != j {
					g -= q[j][k] * x[k]
				}
			}
			v := math.Max(0, g/q[j][j])
			moved = math.Max(moved, math.Abs(v-x[j])*math.Sqrt(q[j][j]))
			x[j] = v
		}
		if moved < 1e-12 {
			break
		}
	}
	return x
}

// FitCache is Fit with the cache size chosen too: it fits the other figures for each power of two
// from 256 KiB to 1 GiB as CacheBytes, by the figures' times alone (without Fit's Gauss-Newton
// steps, for speed), keeps the one whose median absolute relative error is smallest, and
// refines the fit at that size. Once ctx is cancelled, it returns ctx's cause.
func FitCache(ctx context.Context, samples []Sample, base Params, free []string) (Params, []float64, error) {
	var best Params
	bestScore := math.Inf(1)
	for c := float64(256 << 10); c <= 1<<30; c *= 2 {
		b := base
		b.CacheBytes = c
		p, errs, err := fit(ctx, samples, b, free, false)
		if err != nil {
			return p, nil, err
		}
		abs := make([]float64, len(errs))
		for i, e := range errs {
			abs[i] = math.Abs(e)
		}
		slices.Sort(abs)
		score := abs[len(abs)/2] + abs[len(abs)-1]/10 // the median, the worst as a tie-break
		if score < bestScore {
			best, bestScore = p, score
		}
	}
	b := base
	b.CacheBytes = best.CacheBytes
	return Fit(ctx, samples, b, free)
}
