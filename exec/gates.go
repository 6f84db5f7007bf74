package exec

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/ir"
)

// gates hold the wait ops of the ranks a session runs (docs/language.md, wait) until what they
// wait for holds: a count of the writes that landed in a region, which a counter the NIC
// raises gives (nic.RMAEventContext, libfabric's FI_RMA_EVENT), or the value of a memory word,
// which the CPU reads. An engine asks ready before it runs a wait, and keeps asking while it
// polls; next starts an iteration.
//
// Counters are never reset: iteration i waits for its count plus i times the writes that land
// in the region per iteration, as triggered plans do with their thresholds (ir/trigger.go), so
// that a faster peer's writes of the next iteration cannot be lost to a reset. A word is reset
// only with the rest of the memory, by Run between iterations that a barrier separates (next's
// fresh); otherwise (Coll.Start, which never resets a buffer) iteration i waits for the value
// plus i times what the atomic adds into the word add per iteration, from the word's init,
// which the session set before its first iteration (Memory.initWords). Op.Start refuses the
// iteration whose adds would take a word past its type's largest value (ir.Graph.WordLimit):
// past it the word wraps, and so would the threshold, and a wait would hang or complete early.
type gates struct {
	g        *ir.Graph
	byOp     map[ir.OpID]*gate
	regions  map[regionKey]nic.Counter // the counter bound to each counted region
	round    uint64                    // the iteration, counted from 0 by next
	wordFrom uint64                    // the iteration that started with every word at its init
	began    bool
}

// gate is what one wait op waits for.
type gate struct {
	cntr nic.Counter // landings; nil for a word
	per  uint64      // the writes that land in the region per iteration
	word []byte      // the word's 8 bytes, for a word wait
	need uint64      // the count (in iteration 0), or the value (compared as the word's type)
	sign bool        // the word is an i64
}

// newGates makes the gates of the wait ops of the ranks in res: a counter bound to the region
// of each distinct region a wait counts, on the rank's context. A context that cannot count the
// writes that land in a region refuses the plan, naming the wait.
func newGates(g *ir.Graph, mem *Memory, res []*rankRes, p nic.Provider) (*gates, error) {
	gs := &gates{g: g, regions: map[regionKey]nic.Counter{}}
	made := gs.regions
	for _, r := range res {
		first, end := g.RankOps(r.rank)
		for id := first; id < end; id++ {
			op := &g.Ops[id]
			if op.Kind != ir.OpWait {
				continue
			}
			if gs.byOp == nil {
				gs.byOp = map[ir.OpID]*gate{}
			}
			if op.WaitsWord() {
				b, err := mem.SliceBytes(r.rank, op.Dst)
				if err != nil {
					return nil, opError(g, id, err)
				}
				if len(b) != 8 || uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
					return nil, opErrorf(g, id, "the word of the wait, %s, is not one aligned 8-byte element", g.SliceString(op.Dst))
				}
				gs.byOp[id] = &gate{word: b, need: uint64(op.A()), per: uint64(g.Landing(r.rank, op.Dst, true)), sign: g.Buffers[op.Dst.Buf].Type == ir.I64}
				continue
			}
			k := regionKey{r.rank, op.Dst}
			c := made[k]
			if c == nil {
				ctx, ok := r.dev.(nic.RMAEventContext)
				if !ok {
					return nil, opErrorf(g, id, "%s cannot count the writes that land in a memory region (libfabric FI_RMA_EVENT, a counter bound to the region for remote writes), which wait %s needs", p.Name(), op.Name)
				}
				var err error
				if c, err = ctx.CreateCounter(); err != nil {
					return nil, opErrorf(g, id, "a counter for the writes that land in %s: %v", g.SliceString(op.Dst), err)
				}
				mr, off, n := r.countMR(g, op.Dst)
				if err := ctx.BindRemoteWrites(c, mr, off, n); err != nil {
					return nil, opErrorf(g, id, "counting the writes that land in %s: %v", g.SliceString(op.Dst), err)
				}
				made[k] = c
			}
			gs.byOp[id] = &gate{cntr: c, need: uint64(op.A()), per: uint64(g.Landing(r.rank, op.Dst, false))}
		}
	}
	return gs, nil
}

// regionKey names a counted region of a rank.
type regionKey struct {
	rank int
	s    ir.Slice
}

// landCounter is the counter bound to region s of rank r for the writes that land there, which
// a wait of r counts; nil when no wait counts s.
func (gs *gates) landCounter(r int, s ir.Slice) nic.Counter {
	if gs == nil {
		return nil
	}
	return gs.regions[regionKey{r, s}]
}

// any reports whether the plan has a wait op.
func (gs *gates) any() bool { return gs != nil && gs.byOp != nil }

// waits reports whether op id is a wait that a gate holds.
func (gs *gates) waits(id ir.OpID) bool {
	if gs == nil || gs.byOp == nil {
		return false
	}
	_, ok := gs.byOp[id]
	return ok
}

// ready reports whether wait id may complete.
func (gs *gates) ready(id ir.OpID) bool {
	t := gs.byOp[id]
	have, need := t.value(), t.need+gs.round*t.per
	if t.cntr == nil {
		need = t.need + (gs.round-gs.wordFrom)*t.per
	}
	if t.sign {
		return int64(have) >= int64(need)
	}
	return have >= need
}

// value is the count or the word's value now.
func (t *gate) value() uint64 {
	if t.cntr != nil {
		return t.cntr.Value()
	}
	// The NIC (another goroutine on some providers) adds to the word: read it atomically.
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&t.word[0])))
}

// describe says what wait id waits for and how far it got, for a hang report.
func (gs *gates) describe(id ir.OpID) string {
	t := gs.byOp[id]
	op := &gs.g.Ops[id]
	if t.cntr != nil {
		base := gs.round * t.per
		return fmt.Sprintf("wait %s: %d of the %d writes it waits for have landed in %s", op.Name, t.value()-base, t.need, gs.g.SliceString(op.Dst))
	}
	v, need := binary.LittleEndian.Uint64(t.word), t.need+(gs.round-gs.wordFrom)*t.per
	if t.sign {
		return fmt.Sprintf("wait %s: %s holds %d, not yet %d", op.Name, gs.g.SliceString(op.Dst), int64(v), int64(need))
	}
	return fmt.Sprintf("wait %s: %s holds %d, not yet %d", op.Name, gs.g.SliceString(op.Dst), v, need)
}

// next starts an iteration: the first call starts iteration 0. fresh says the memory was just
// reset to its inits, the words with it.
func (gs *gates) next(fresh bool) {
	if gs == nil {
		return
	}
	if gs.began {
		gs.round++
	}
	gs.began = true
	if fresh {
		gs.wordFrom = gs.round
	}
}
