package ir

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Watched words across iterations (docs/language.md, wait). A wait on a memory word (`wait
// WORD >= VALUE`) reads a word that atomic adds raise; the checks prove that one iteration's
// adds cannot take it past its type's largest value. Where nothing resets the memory between
// iterations (an Op's starts: Coll.Start never resets a buffer), the word goes on growing, and
// iteration i waits for VALUE plus i times what the adds bring per iteration, as a counter of
// landings does. Some iteration's adds would then take it past the largest value: the NIC's
// add wraps it around to the smallest, and a wait that compares it with its threshold hangs
// or completes early. WordLimit is the most iterations that keep every watched word within its
// type, for a caller to refuse the one after.

// WordLimit is the watched word of a plan that limits how many iterations it can run with no
// reset of its memory between them.
type WordLimit struct {
	Rank int
	Wait OpID  // the first wait of the rank that watches the word
	Word Slice // the word: one u64 or i64 element
	// Start is the word's value before the first iteration (its buffer's init), as its 8 bytes.
	Start uint64
	// PerIteration is what the atomic adds into the word bring in one iteration (Landing).
	PerIteration uint64
	// Iterations is the most iterations that keep the word within its type; NoIterationLimit
	// when no word grows.
	Iterations uint64
}

// WordLimit is the watched word that wraps first when no iteration resets the memory, over all
// ranks (the lowest rank, then the first wait, among equals): so that every process of a plan
// run across processes refuses the same iteration. Rank is -1 and Iterations NoIterationLimit
// when no watched word grows. A word whose start cannot be known (an extern buffer, an init
// that fails: the checks refuse both) limits nothing.
func (g *Graph) WordLimit() WordLimit {
	out := WordLimit{Rank: -1, Wait: None, Word: NoSlice, Iterations: NoIterationLimit}
	type word struct {
		rank int
		s    Slice
	}
	first := map[word]OpID{} // each watched word, and the first wait that watches it
	var words []word
	for i := range g.Ops {
		if op := &g.Ops[i]; op.WaitsWord() {
			w := word{int(op.Rank), op.Dst}
			if _, ok := first[w]; !ok {
				first[w] = OpID(i)
				words = append(words, w)
			}
		}
	}
	if len(words) == 0 {
		return out
	}
	per := make(map[word]uint64, len(words)) // one pass over the ops: Landing of every word
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Kind != OpAtomicAdd || !op.Kind.OnQueue() {
			continue
		}
		w := word{g.Queues[op.Queue].PeerRank, op.Dst}
		if _, ok := first[w]; ok {
			per[w] += uint64(g.LandWeight(OpID(i), w.rank, w.s, true)) // modulo 2^64, as the NIC adds
		}
	}
	// Each word's start, from its buffer's init on its rank: one buffer's contents at a time
	// (the words come in op order, so rank by rank), never every rank's at once.
	var (
		last = word{rank: -1}
		data []byte
	)
	for _, w := range words {
		amount := per[w]
		b := &g.Buffers[w.s.Buf]
		if amount == 0 || b.Extern {
			continue
		}
		if k := (word{w.rank, Slice{Buf: w.s.Buf}}); k != last {
			last, data = k, make([]byte, b.Bytes())
			if b.Init != nil && b.Init(w.rank, data) != nil {
				data = nil
			}
		}
		if data == nil || (w.s.Off+1)*8 > int64(len(data)) {
			continue
		}
		start := binary.LittleEndian.Uint64(data[w.s.Off*8:])
		n := (WordLevel(b.Type, WordTop(b.Type)) - WordLevel(b.Type, start)) / amount
		if n < out.Iterations || (n == out.Iterations && (w.rank < out.Rank || w.rank == out.Rank && first[w] < out.Wait)) {
			out = WordLimit{Rank: w.rank, Wait: first[w], Word: w.s, Start: start, PerIteration: amount, Iterations: n}
		}
	}
	return out
}

// Check returns an error when iters iterations with no reset of the memory between them
// (counted from the first, which starts every word at its init) would take lim's word, a
// watched word of g, past its type's largest value. It names the word, its rank, the wait that
// watches it, where it starts, what the adds bring per iteration, the iteration that would
// wrap it and the most iterations that fit, and matches ErrIterationLimit.
func (lim WordLimit) Check(g *Graph, iters uint64) error {
	if iters <= lim.Iterations {
		return nil
	}
	t := g.Buffers[lim.Word.Buf].Type
	fit := fmt.Sprintf("at most %d iterations fit", lim.Iterations)
	if lim.Iterations == 1 {
		fit = "only the first iteration fits"
	}
	return limitError{fmt.Sprintf("%d iterations would wrap %s on rank %d, the word that wait %s watches: it starts at %s, the atomic adds into it raise it by %d per iteration and nothing resets it between iterations, so iteration %d (counting from 1) would take it past %s, the largest %s, and the wait would hang or complete too early: %s (start the word lower, or add less)",
		iters, g.SliceString(lim.Word), lim.Rank, g.Ops[lim.Wait].Name, WordString(t, lim.Start), lim.PerIteration, lim.Iterations+1, WordString(t, WordTop(t)), t, fit)}
}

// WordLevel is where the value v (a word's 8 bytes) of type t stands among the values of t,
// from 0 for the smallest to 2^64 - 1 for the largest: an add of a raises a word's level by a
// unless the sum passes 2^64 - 1 (the word wraps around), and a wait's threshold is reached
// when the word's level is at least the threshold's, as the engines compare (signed for an
// i64, unsigned for a u64).
func WordLevel(t ElemType, v uint64) uint64 {
	if t == I64 {
		return v ^ 1<<63
	}
	return v
}

// WordTop is the largest value of a word of type t (u64 or i64), as its 8 bytes.
func WordTop(t ElemType) uint64 {
	if t == I64 {
		return 1<<63 - 1
	}
	return 1<<64 - 1
}

// WordString is the value v of a word of type t (its 8 bytes) in decimal, as t reads it.
func WordString(t ElemType, v uint64) string {
	if t == I64 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatUint(v, 10)
}
