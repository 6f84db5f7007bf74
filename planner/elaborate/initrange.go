package elaborate

import (
	"math"
	"math/bits"

	"github.com/coredag/coredag/dsl"
)

// Range analysis of init expressions. checkInits must show that a buffer's init evaluates
// without error for every element on every rank, and a buffer can have billions of elements. So
// it evaluates the expression over boxes of (rank, i) values: each sub-expression gets a range
// that holds every value it takes in the box, and a flag saying whether it can fail there
// (division by zero, overflow, a negative shift...). A box where nothing can fail is proven
// whole; the others are split until they are proven or small enough to evaluate element by
// element. The ranges are conservative: "safe" is only ever claimed when no point of the box
// can fail; a box that merely might fail is split, never reported.

// initBox is a set of points: ranks r0..r1 and element indices i0..i1, all inclusive.
type initBox struct{ r0, r1, i0, i1 int64 }

// irange is the range of an integer sub-expression over a box; ok means it cannot fail there.
type irange struct {
	lo, hi int64
	ok     bool
}

// frange is the same for a float sub-expression (an init with a float literal). NaN never
// appears in lo or hi: an unknown range is [-Inf, +Inf].
type frange struct {
	lo, hi float64
	ok     bool
}

var (
	anyInt   = irange{math.MinInt64, math.MaxInt64, true}
	failInt  = irange{math.MinInt64, math.MaxInt64, false}
	anyFloat = frange{math.Inf(-1), math.Inf(1), true}
)

// rangeEnv evaluates ranges over one box: rank and i are ranges, other names are the globals.
type rangeEnv struct {
	globals *scope
	box     initBox
}

func (env *rangeEnv) ident(name string) irange {
	switch name {
	case "i":
		return irange{env.box.i0, env.box.i1, true}
	case "rank":
		return irange{env.box.r0, env.box.r1, true}
	}
	if v, ok := env.globals.lookup(name); ok {
		return irange{v, v, true}
	}
	return failInt // undefined, or broken: evaluation reports it
}

// intRange bounds an integer expression as evalInt computes it.
func (env *rangeEnv) intRange(e dsl.Expr) irange {
	switch e := e.(type) {
	case *dsl.IntLit:
		return irange{e.Value, e.Value, true}
	case *dsl.Ident:
		return env.ident(e.Name)
	case *dsl.ParenExpr:
		return env.intRange(e.X)
	case *dsl.UnaryExpr:
		x := env.intRange(e.X)
		switch e.Op {
		case "+":
			return x
		case "-":
			if x.lo == math.MinInt64 {
				return failInt
			}
			return irange{-x.hi, -x.lo, x.ok}
		case "!":
			return irange{b2i(x.lo == 0 && x.hi == 0), b2i(x.lo <= 0 && x.hi >= 0), x.ok}
		case "^":
			return irange{^x.hi, ^x.lo, x.ok}
		}
	case *dsl.BinaryExpr:
		return env.binaryRange(e)
	case *dsl.CallExpr:
		return env.callRange(e)
	case *dsl.CondExpr:
		c := env.intRange(e.Cond)
		if !c.ok {
			return failInt
		}
		// Only the branch taken is evaluated: where the condition is known, the other one
		// cannot fail.
		switch t := truth(c); {
		case t.lo == 1:
			return env.intRange(e.Then)
		case t.hi == 0:
			return env.intRange(e.Else)
		}
		a, b := env.intRange(e.Then), env.intRange(e.Else)
		return irange{min(a.lo, b.lo), max(a.hi, b.hi), a.ok && b.ok}
	}
	return failInt
}

// truth is the range of a value used as a condition: [0, 1] narrowed where it is known.
func truth(x irange) irange {
	zero := x.lo <= 0 && x.hi >= 0
	nonzero := x.lo != 0 || x.hi != 0
	return irange{b2i(!zero), b2i(nonzero), x.ok}
}

func (env *rangeEnv) binaryRange(e *dsl.BinaryExpr) irange {
	x := env.intRange(e.X)
	switch e.Op {
	case "&&", "||":
		y := env.intRange(e.Y)
		tx, ty := truth(x), truth(y)
		// y is evaluated only where x does not decide: where it does everywhere, y cannot fail.
		decided := e.Op == "&&" && tx.hi == 0 || e.Op == "||" && tx.lo == 1
		if decided {
			return irange{tx.lo, tx.hi, x.ok}
		}
		ok := x.ok && y.ok
		if e.Op == "&&" {
			return irange{min(tx.lo, ty.lo), min(tx.hi, ty.hi), ok}
		}
		return irange{max(tx.lo, ty.lo), max(tx.hi, ty.hi), ok}
	}
	y := env.intRange(e.Y)
	if !x.ok || !y.ok {
		return failInt
	}
	switch e.Op {
	case "+":
		lo, ok1 := addChecked(x.lo, y.lo)
		hi, ok2 := addChecked(x.hi, y.hi)
		return irange{lo, hi, ok1 && ok2}
	case "-":
		if y.lo == math.MinInt64 {
			return failInt
		}
		lo, ok1 := addChecked(x.lo, -y.hi)
		hi, ok2 := addChecked(x.hi, -y.lo)
		return irange{lo, hi, ok1 && ok2}
	case "*":
		return corners(x, y, func(a, b int64) (int64, bool) { return mulChecked(a, b) })
	case "/", "%":
		if y.lo <= 0 && y.hi >= 0 || x.lo == math.MinInt64 && y.lo <= -1 && y.hi >= -1 {
			return failInt // a zero divisor, or MinInt64 / -1, may be in the box
		}
		if e.Op == "/" {
			return corners(x, y, func(a, b int64) (int64, bool) { return floorDiv(a, b), true })
		}
		switch {
		case y.lo > 0 && x.lo >= 0 && x.hi < y.lo:
			return irange{x.lo, x.hi, true} // x % y is x
		case y.lo > 0:
			return irange{0, y.hi - 1, true}
		}
		return irange{y.lo + 1, 0, true}
	case "**":
		return powRange(x, y)
	case "<<":
		if y.lo < 0 {
			return failInt
		}
		if x.lo == 0 && x.hi == 0 {
			return irange{0, 0, true}
		}
		if y.hi >= 63 {
			return failInt
		}
		return corners(x, y, func(a, b int64) (int64, bool) {
			if a == 0 {
				return 0, true
			}
			return a << b, a<<b>>b == a && (a > 0) == (a<<b > 0)
		})
	case ">>":
		if y.lo < 0 {
			return failInt
		}
		return corners(x, irange{y.lo, min(y.hi, 63), true}, func(a, b int64) (int64, bool) { return a >> b, true })
	case "&", "|", "^", "&^":
		return bitRange(e.Op, x, y)
	case "==", "!=":
		disjoint := x.hi < y.lo || y.hi < x.lo
		same := x.lo == x.hi && y.lo == y.hi && x.lo == y.lo
		r := irange{b2i(same), b2i(!disjoint), true}
		if e.Op == "!=" {
			r.lo, r.hi = 1-r.hi, 1-r.lo
		}
		return r
	case "<":
		return irange{b2i(x.hi < y.lo), b2i(x.lo < y.hi), true}
	case "<=":
		return irange{b2i(x.hi <= y.lo), b2i(x.lo <= y.hi), true}
	case ">":
		return irange{b2i(x.lo > y.hi), b2i(x.hi > y.lo), true}
	case ">=":
		return irange{b2i(x.lo >= y.hi), b2i(x.hi >= y.lo), true}
	}
	return failInt
}

func addChecked(a, b int64) (int64, bool) {
	r := a + b
	return r, (r > a) == (b > 0) || b == 0
}

func floorDiv(a, b int64) int64 {
	q, r := a/b, a%b
	if r != 0 && (r < 0) != (b < 0) {
		q--
	}
	return q
}

// corners bounds an operation that is monotone in each argument (in a direction that may
// depend on the other's sign) by its values at the four corners of the box; any corner that
// overflows makes the range unsafe.
func corners(x, y irange, f func(a, b int64) (int64, bool)) irange {
	r := irange{math.MaxInt64, math.MinInt64, true}
	for _, a := range [2]int64{x.lo, x.hi} {
		for _, b := range [2]int64{y.lo, y.hi} {
			v, ok := f(a, b)
			if !ok {
				return failInt
			}
			r.lo, r.hi = min(r.lo, v), max(r.hi, v)
		}
	}
	return r
}

// powRange bounds x ** y.
func powRange(x, y irange) irange {
	if y.lo < 0 {
		return failInt
	}
	pow := func(a, b int64) (int64, bool) {
		switch a {
		case 0:
			return b2i(b == 0), true
		case 1:
			return 1, true
		case -1:
			return 1 - 2*(b&1), true
		}
		r := int64(1)
		for k := int64(0); k < b; k++ {
			var ok bool
			if r, ok = mulChecked(r, a); !ok {
				return 0, false
			}
		}
		return r, true
	}
	if x.lo == math.MinInt64 {
		return failInt
	}
	m := max(-x.lo, x.hi) // the largest magnitude
	p, ok := pow(m, y.hi)
	if !ok || m > 1 && y.hi > 63 {
		return failInt
	}
	if x.lo >= 0 {
		return irange{0, max(p, 1), true}
	}
	return irange{-p, max(p, 1), true}
}

// bitRange bounds the bitwise operators, which never fail.
func bitRange(op string, x, y irange) irange {
	if x.lo < 0 || y.lo < 0 {
		return anyInt
	}
	top := int64(1)<<bits.Len64(uint64(max(x.hi, y.hi))) - 1 // every bit either can set
	switch op {
	case "^":
		if x.hi < y.lo || y.hi < x.lo {
			return irange{1, top, true} // x ^ y is 0 only where x == y
		}
	case "&":
		return irange{0, min(x.hi, y.hi), true}
	case "|":
		return irange{max(x.lo, y.lo), top, true}
	case "&^":
		return irange{0, x.hi, true}
	}
	return irange{0, top, true}
}

func (env *rangeEnv) callRange(e *dsl.CallExpr) irange {
	args := make([]irange, len(e.Args))
	for i, a := range e.Args {
		if args[i] = env.intRange(a); !args[i].ok {
			return failInt
		}
	}
	switch {
	case e.Fun.Name == "min" && len(args) == 2:
		return irange{min(args[0].lo, args[1].lo), min(args[0].hi, args[1].hi), true}
	case e.Fun.Name == "max" && len(args) == 2:
		return irange{max(args[0].lo, args[1].lo), max(args[0].hi, args[1].hi), true}
	case len(args) == 1 && monotone[e.Fun.Name] && args[0].lo > 0:
		// Non-decreasing on positive arguments, where they cannot fail (log2 can, between
		// powers of two: it is bounded only at a single value).
		if e.Fun.Name == "log2" && args[0].lo != args[0].hi {
			return failInt
		}
		b := builtins[e.Fun.Name]
		lo, err1 := b.f(e, []int64{args[0].lo})
		hi, err2 := b.f(e, []int64{args[0].hi})
		if err1 != nil || err2 != nil {
			return failInt
		}
		return irange{lo, hi, true}
	case (e.Fun.Name == "popcount" || e.Fun.Name == "lobit") && len(args) == 1 && args[0].lo >= 0:
		return irange{0, max(args[0].hi, 0), true} // both at most x
	}
	return failInt // quo, rem and the plan's functions: evaluated point by point
}

// monotone are the built-in functions of one argument that never decrease on positive
// arguments.
var monotone = map[string]bool{"log2": true, "flog2": true, "clog2": true, "hibit": true, "nextpow2": true}

// floatRange bounds a float init expression as evalFloat computes it. Rounding to nearest is
// monotone, so bounds computed at the corners in float64 hold every rounded interior value.
func (env *rangeEnv) floatRange(e dsl.Expr) frange {
	if !hasFloat(e) { // an integer sub-expression (evalFloat's typing is local)
		r := env.intRange(e)
		return frange{float64(r.lo), float64(r.hi), r.ok}
	}
	switch e := e.(type) {
	case *dsl.FloatLit:
		return frange{e.Value, e.Value, true}
	case *dsl.ParenExpr:
		return env.floatRange(e.X)
	case *dsl.CondExpr:
		if hasFloat(e.Cond) {
			return frange{ok: false}
		}
		c := env.intRange(e.Cond)
		if !c.ok {
			return frange{ok: false}
		}
		switch t := truth(c); {
		case t.lo == 1:
			return env.floatRange(e.Then)
		case t.hi == 0:
			return env.floatRange(e.Else)
		}
		a, b := env.floatRange(e.Then), env.floatRange(e.Else)
		return frange{math.Min(a.lo, b.lo), math.Max(a.hi, b.hi), a.ok && b.ok}
	case *dsl.UnaryExpr:
		x := env.floatRange(e.X)
		switch e.Op {
		case "+":
			return x
		case "-":
			return frange{-x.hi, -x.lo, x.ok}
		}
		return frange{ok: false}
	case *dsl.CallExpr:
		if (e.Fun.Name == "min" || e.Fun.Name == "max") && len(e.Args) == 2 {
			a, b := env.floatRange(e.Args[0]), env.floatRange(e.Args[1])
			if e.Fun.Name == "min" {
				return frange{math.Min(a.lo, b.lo), math.Min(a.hi, b.hi), a.ok && b.ok}
			}
			return frange{math.Max(a.lo, b.lo), math.Max(a.hi, b.hi), a.ok && b.ok}
		}
	case *dsl.BinaryExpr:
		x, y := env.floatRange(e.X), env.floatRange(e.Y)
		ok := x.ok && y.ok
		switch e.Op {
		case "+":
			return fcorners(frange{x.lo, x.hi, ok}, y, func(a, b float64) float64 { return a + b })
		case "-":
			return fcorners(frange{x.lo, x.hi, ok}, y, func(a, b float64) float64 { return a - b })
		case "*":
			return fcorners(frange{x.lo, x.hi, ok}, y, func(a, b float64) float64 { return a * b })
		case "/":
			if y.lo <= 0 && y.hi >= 0 {
				return frange{ok: false}
			}
			return fcorners(frange{x.lo, x.hi, ok}, y, func(a, b float64) float64 { return a / b })
		case "**":
			return frange{anyFloat.lo, anyFloat.hi, ok}
		}
	}
	return frange{ok: false}
}

// fcorners is corners for floats; a NaN at a corner (Inf - Inf) leaves the range unknown.
func fcorners(x, y frange, f func(a, b float64) float64) frange {
	r := frange{math.Inf(1), math.Inf(-1), x.ok && y.ok}
	for _, a := range [2]float64{x.lo, x.hi} {
		for _, b := range [2]float64{y.lo, y.hi} {
			v := f(a, b)
			if math.IsNaN(v) {
				return frange{anyFloat.lo, anyFloat.hi, r.ok}
			}
			r.lo, r.hi = math.Min(r.lo, v), math.Max(r.hi, v)
		}
	}
	return r
}

// safe reports whether the init expression e cannot fail anywhere in box.
func (env *rangeEnv) safe(e dsl.Expr, float bool) bool {
	if float {
		return env.floatRange(e).ok
	}
	return env.intRange(e).ok
}
