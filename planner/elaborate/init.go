package elaborate

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
)

// initFunc builds the function that fills a buffer from its init expression on a rank; `i` is
// the element index. An expression that does not use `i` is evaluated once per rank. A failure
// is an *InitError.
func (el *elaborator) initFunc(e dsl.Expr, t ir.ElemType) ir.InitFunc {
	globals := el.globals
	float := hasFloat(e)
	perElem := uses(e, "i")
	return func(rank int, dst []byte) error {
		s := &scope{parent: globals}
		s.bind("rank", int64(rank))
		s.bind("i", 0)
		size := int(t.Size())
		n := len(dst) / size
		for i := 0; i < n; i++ {
			if i > 0 && !perElem {
				copy(dst[i*size:], dst[:size*min(i, n-i)])
				i += min(i, n-i) - 1
				continue
			}
			s.values[1] = int64(i)
			bitsv, err := initValue(e, s, t, float)
			if err != nil {
				elem := int64(i)
				if !perElem {
					elem = -1
				}
				return &ir.InitError{Pos: err.pos, Msg: err.msg, Elem: elem, Rank: rank, Format: err.kind}
			}
			putElem(dst[i*size:], t, bitsv)
		}
		return nil
	}
}

// initValue evaluates an init expression in s, giving the element's bit pattern.
func initValue(e dsl.Expr, s *scope, t ir.ElemType, float bool) (uint64, *evalError) {
	if float {
		v, err := evalFloat(e, s)
		return floatBits(v, t), err
	}
	v, err := evalInt(e, s)
	return intBits(v, t), err
}

// checkInits proves that every buffer's init evaluates without error on every element of every
// rank, so that a failing init (a division by zero at one element) is a diagnostic of check,
// not a failure of run. It evaluates the expression over boxes of ranks and elements with range
// analysis (initrange.go), splitting the boxes where it cannot prove them, down to single
// elements; on each rank the first failing element is reported. The work is bounded by
// MaxInitChecks evaluations over all buffers; what is left unproven past it is said in a note
// (Graph.Notes), and evaluated only at run time.
func (el *elaborator) checkInits() {
	budget := int64(el.maxInitChecks())
	for _, st := range el.file.Stmts {
		bs, ok := st.(*dsl.BufferStmt)
		if !ok || bs.Init == nil || el.truncated {
			continue
		}
		el.at = bs
		id, ok := el.bufIdx[bs.Name.Name]
		if !ok || el.g.Buffers[id].Pos != bs.Name.Pos() || el.g.Buffers[id].Init == nil {
			continue
		}
		b := &el.g.Buffers[id]
		c := &initChecker{el: el, b: b, e: bs.Init, float: hasFloat(bs.Init), perElem: el.perElem[id], budget: &budget, failed: map[int64]bool{}}
		n := int64(0)
		if el.perElem[id] {
			n = b.Count - 1
		}
		c.visit(initBox{0, int64(el.g.Ranks) - 1, 0, n})
		c.note()
	}
}

// initChecker proves one buffer's init.
type initChecker struct {
	el      *elaborator
	b       *ir.Buffer
	e       dsl.Expr
	float   bool
	perElem bool
	budget  *int64
	nodes   int64               // e's nodes, the steps of a range analysis (steps.go), once known
	failed  map[int64]bool      // ranks on which an element failed (reported)
	onFail  func(*ir.InitError) // tests: instead of a diagnostic

	// what the budget left unchecked
	skipped      int64   // points (element and rank)
	skippedRanks []int64 // ranks with unchecked points, each once, ascending
	firstSkipped initBox // the first unchecked box
}

// maxInitChecks is MaxInitChecks, or lower (Options).
func (el *elaborator) maxInitChecks() int {
	if n := el.opt.MaxInitChecks; n > 0 && n < MaxInitChecks {
		return n
	}
	return MaxInitChecks
}

// smallBox is the number of elements below which a box is evaluated element by element.
const smallBox = 16

func (c *initChecker) visit(box initBox) {
	if *c.budget <= 0 {
		c.skip(box)
		return
	}
	*c.budget--
	if c.nodes == 0 {
		c.nodes = exprNodes(c.e)
	}
	if err := c.el.work.charge(walkSteps * c.nodes); err != nil { // the range analysis walks e once
		c.el.evalStopped(err)
		*c.budget = 0
		return
	}
	env := rangeEnv{globals: c.el.globals, box: box}
	if env.safe(c.e, c.float) {
		return
	}
	if box.r0 < box.r1 {
		mid := box.r0 + (box.r1-box.r0)/2
		c.visit(initBox{box.r0, mid, box.i0, box.i1})
		c.visit(initBox{mid + 1, box.r1, box.i0, box.i1})
		return
	}
	if c.failed[box.r0] {
		return
	}
	if box.i1-box.i0 >= smallBox {
		mid := box.i0 + (box.i1-box.i0)/2
		c.visit(initBox{box.r0, box.r0, box.i0, mid})
		if !c.failed[box.r0] {
			c.visit(initBox{box.r0, box.r0, mid + 1, box.i1})
		}
		return
	}
	s := &scope{parent: c.el.globals, m: c.el.work}
	s.bind("rank", box.r0)
	s.bind("i", 0)
	for i := box.i0; i <= box.i1; i++ {
		if *c.budget <= 0 {
			c.skip(initBox{box.r0, box.r0, i, box.i1})
			return
		}
		*c.budget--
		s.values[1] = i
		if _, err := initValue(c.e, s, c.b.Type, c.float); err != nil {
			if err.stop != stopNone { // the budget ran out: the elaboration stops
				c.el.evalStopped(err)
				*c.budget = 0
				return
			}
			elem := i
			if !c.perElem {
				elem = -1
			}
			c.failed[box.r0] = true
			c.report(&ir.InitError{Pos: err.pos, Msg: err.msg, Elem: elem, Rank: int(box.r0), Format: err.kind})
			return
		}
	}
}

func (c *initChecker) report(ie *ir.InitError) {
	if c.onFail != nil {
		c.onFail(ie)
		return
	}
	d := ie.Diagnostic(c.b.Name)
	// Worded without the rank: the ranks that fail alike are listed once.
	d.Msg = strings.TrimSuffix(d.Msg, fmt.Sprintf(" on rank %d", ie.Rank))
	c.el.report(phaseNames, ie.Rank, d, "init: "+ie.Format)
}

// skip records a box the budget left unchecked.
func (c *initChecker) skip(box initBox) {
	if c.skipped == 0 {
		c.firstSkipped = box
	}
	c.skipped += (box.r1 - box.r0 + 1) * (box.i1 - box.i0 + 1)
	for r := box.r0; r <= box.r1; r++ {
		if k := len(c.skippedRanks); k == 0 || c.skippedRanks[k-1] < r {
			c.skippedRanks = append(c.skippedRanks, r)
		}
	}
}

// note says what the budget left unchecked. Boxes are visited in order of rank, then element,
// so what is left is everything from the first skipped point on.
func (c *initChecker) note() {
	if c.skipped == 0 {
		return
	}
	ranks := make([]int, len(c.skippedRanks))
	for i, r := range c.skippedRanks {
		ranks[i] = int(r)
	}
	var what string
	switch {
	case !c.perElem:
		what = "on " + diag.FormatRanks(ranks) + " it is"
	case len(ranks) == 1:
		what = fmt.Sprintf("from element %d on rank %d, %s are", c.firstSkipped.i0, ranks[0], english.Plural(int(c.skipped), "element"))
	default:
		what = fmt.Sprintf("from element %d on rank %d, %s on %s are", c.firstSkipped.i0, c.firstSkipped.r0, english.Plural(int(c.skipped), "element"), diag.FormatRanks(ranks))
	}
	c.el.g.Notes = append(c.el.g.Notes, &diag.Diagnostic{Code: diag.Limit, Pos: c.e.Pos(), Msg: fmt.Sprintf(
		"the init of buffer %s is checked only in part: %s left to run time, where an error stops the run (checking stops after %d evaluations)",
		c.b.Name, what, c.el.maxInitChecks())})
}

func floatBits(v float64, t ir.ElemType) uint64 {
	if t == ir.F32 {
		return uint64(math.Float32bits(float32(v)))
	}
	return math.Float64bits(v)
}

// intBits converts an integer to the element type's bit pattern: integers wrap modulo 2^bits.
func intBits(v int64, t ir.ElemType) uint64 {
	switch t {
	case ir.F32:
		return uint64(math.Float32bits(float32(v)))
	case ir.F64:
		return math.Float64bits(float64(v))
	}
	return uint64(v)
}

func putElem(dst []byte, t ir.ElemType, v uint64) {
	switch t.Size() {
	case 1:
		dst[0] = byte(v)
	case 4:
		binary.LittleEndian.PutUint32(dst, uint32(v))
	default:
		binary.LittleEndian.PutUint64(dst, v)
	}
}
