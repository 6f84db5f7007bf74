package planner

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/coredag/coredag/dsl"
)

// initFunc builds the function that fills a buffer from its init expression on a rank; `i` is
// the element index. An expression that does not use `i` is evaluated once per rank.
func (el *elaborator) initFunc(e dsl.Expr, t ElemType) InitFunc {
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
			var bitsv uint64
			if float {
				v, err := evalFloat(e, s)
				if err != nil {
					return initError(err, i, rank)
				}
				bitsv = floatBits(v, t)
			} else {
				v, err := evalInt(e, s)
				if err != nil {
					return initError(err, i, rank)
				}
				bitsv = intBits(v, t)
			}
			putElem(dst[i*size:], t, bitsv)
		}
		return nil
	}
}

// initError positions an init failure at the offending sub-expression.
func initError(err *evalError, i, rank int) *dsl.Error {
	return &dsl.Error{Pos: err.pos, Msg: fmt.Sprintf("%s (init of element %d on rank %d)", err.msg, i, rank)}
}

// checkInits evaluates every buffer's init on every rank, so that an init that fails (a
// division by zero at one element) is a diagnostic of check, not a failure of run. An init that
// does not use `i` costs one evaluation per rank; one that does costs one per element, and past
// MaxInitChecks evaluations in all, the rest is left to run time.
func (el *elaborator) checkInits() {
	budget := int64(MaxInitChecks)
	for bi := range el.g.Buffers {
		b := &el.g.Buffers[bi]
		if b.Init == nil {
			continue
		}
		n := int64(1)
		if b.perElem {
			n = b.Count
		}
		if n*int64(el.g.Ranks) > budget {
			continue
		}
		budget -= n * int64(el.g.Ranks)
		dst := make([]byte, n*b.Type.Size())
		for r := 0; r < el.g.Ranks; r++ {
			if err := b.Init(r, dst); err != nil {
				if de, ok := err.(*dsl.Error); ok {
					msg, _, _ := strings.Cut(de.Msg, " (init of element")
					el.diag[phaseNames].add(de.Pos, r, "%s in the init of buffer %s", msg, b.Name)
				}
			}
		}
	}
}

func floatBits(v float64, t ElemType) uint64 {
	if t == F32 {
		return uint64(math.Float32bits(float32(v)))
	}
	return math.Float64bits(v)
}

// intBits converts an integer to the element type's bit pattern: integers wrap modulo 2^bits.
func intBits(v int64, t ElemType) uint64 {
	switch t {
	case F32:
		return uint64(math.Float32bits(float32(v)))
	case F64:
		return math.Float64bits(float64(v))
	}
	return uint64(v)
}

func putElem(dst []byte, t ElemType, v uint64) {
	switch t.Size() {
	case 1:
		dst[0] = byte(v)
	case 4:
		binary.LittleEndian.PutUint32(dst, uint32(v))
	default:
		binary.LittleEndian.PutUint64(dst, v)
	}
}
