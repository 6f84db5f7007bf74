// Package arena holds the allocation tactics of the elaborator, so that package elaborate
// reads as the rules of the language. None of it knows of plans:
//
//   - Chunk hands out values a few hundred at a time, for what a Graph keeps per op;
//   - Interner keeps one copy of each string made, up to a bound, and Memo is a map that
//     stops growing at its bound;
//   - Free is a free list of scratch values reused from one block to the next;
//   - GrowTo and Grow make room in an array ahead of the elements to come, without clearing
//     it or doubling it, and Prefault faults its pages in before a collection reads them;
//   - Part, Window and Join let workers fill windows of one array and join their parts.
package arena

import (
	"maps"
	"slices"
	"unsafe"
)

// chunkLen is how many values a Chunk allocates at once.
const chunkLen = 256

// Chunk hands out pointers to new zero values of T, allocated chunkLen at a time: what is
// kept per op costs one allocation per chunkLen, not one each. The zero Chunk is ready.
type Chunk[T any] struct{ free []T }

// New returns a pointer to a new zero T.
func (c *Chunk[T]) New() *T {
	if len(c.free) == 0 {
		c.free = make([]T, chunkLen)
	}
	p := &c.free[0]
	c.free = c.free[1:]
	return p
}

// Interner keeps one copy of each string it was given, up to a bound: strings made alike many
// times (the names of SPMD ranks' ops) then share their storage. The zero Interner keeps
// nothing.
type Interner struct {
	m   map[string]string
	max int
}

// NewInterner returns an Interner that keeps at most max strings.
func NewInterner(max int) Interner { return Interner{m: map[string]string{}, max: max} }

// Intern returns the string of b: the copy kept if there is one, else a new string, which it
// keeps if the bound allows. kept reports whether the string returned is the one kept.
func (in *Interner) Intern(b []byte) (s string, kept bool) {
	if s, ok := in.m[string(b)]; ok {
		return s, true
	}
	s = string(b)
	if len(in.m) >= in.max {
		return s, false
	}
	in.m[s] = s
	return s, true
}

// Len is the number of strings kept.
func (in *Interner) Len() int { return len(in.m) }

// Clone returns an Interner that keeps what in keeps, and then its own.
func (in *Interner) Clone() Interner {
	if in.m == nil {
		return Interner{}
	}
	return Interner{m: maps.Clone(in.m), max: in.max}
}

// Memo is a map that keeps at most a bound of entries: past it, Put keeps nothing more. The
// zero Memo keeps nothing.
type Memo[K comparable, V any] struct {
	m   map[K]V
	max int
}

// NewMemo returns a Memo of at most max entries.
func NewMemo[K comparable, V any](max int) Memo[K, V] {
	return Memo[K, V]{m: map[K]V{}, max: max}
}

// Get returns the value kept for k, if any.
func (m *Memo[K, V]) Get(k K) (V, bool) {
	v, ok := m.m[k]
	return v, ok
}

// Put keeps v for k, unless the Memo is full; it reports whether it did.
func (m *Memo[K, V]) Put(k K, v V) bool {
	if _, ok := m.m[k]; !ok && len(m.m) >= m.max {
		return false
	}
	m.m[k] = v
	return true
}

// Len is the number of entries kept.
func (m *Memo[K, V]) Len() int { return len(m.m) }

// Free is a free list: values put back once a use is done, for the next use to take. The
// zero Free is empty and ready.
type Free[T any] struct{ list []*T }

// Get returns a value put back before, or nil when there is none; it is as it was put.
func (f *Free[T]) Get() *T {
	n := len(f.list)
	if n == 0 {
		return nil
	}
	p := f.list[n-1]
	f.list = f.list[:n-1]
	return p
}

// Put gives back p, which the caller no longer uses.
func (f *Free[T]) Put(p *T) { f.list = append(f.list, p) }

// GrowTo returns s with room for n elements. Unlike slices.Grow it does not clear the new room
// itself: a large allocation of memory fresh from the system is not written at all until it is
// used, while clearing 80 MB at once is a stretch that nothing can preempt, in which the first
// write to each page faults (and a collection starting then waits for it, spinning).
func GrowTo[T any](s []T, n int) []T {
	if n > cap(s) {
		return append(make([]T, 0, n), s...)
	}
	return s
}

// Grow returns s with room for n more elements (slices.Grow: not by doubling, when n is an
// estimate of what is to come) and prefaults the new room with touch (Prefault).
func Grow[T any](s []T, n int, touch func(*T)) []T {
	s = slices.Grow(s, n)
	Prefault(s[len(s):cap(s)], touch)
	return s
}

// pageSize is the size of the pages Prefault writes to, the smallest the kernels use.
const pageSize = 4096

// Prefault calls touch on one element of s per page, s being room just allocated, before
// anything else can read it; touch writes to a field of the element that holds no pointer (a
// pointer's write barrier would read the page first). When T holds pointers, a collection that
// starts while the room is filled reads all of it, and the kernel maps each page read before it
// is written to its shared zero page. The first write to such a page then copies it and
// flushes it from every core's TLB, by an interrupt to each: that was a quarter of the system
// time of checking 1024 ranks of the ring allreduce. A page first written takes one plain fault.
func Prefault[T any](s []T, touch func(*T)) {
	step := max(pageSize/int(unsafe.Sizeof(*new(T))), 1)
	for i := 0; i < len(s); i += step {
		touch(&s[i])
	}
}

// A Part is what a worker appended to its window of an array shared with other workers: S, in
// the window that started at At in the array's storage (Window). Join puts it at To.
type Part[T any] struct {
	S  []T
	At int
	To int
}

// Window returns the empty slice of all's storage from lo, with room up to hi: a worker
// appends to it in place, or past hi to a copy of its own.
func Window[T any](all []T, lo, hi int) []T { return all[lo:lo:hi] }

// Join puts the n parts that part returns (part(0) .. part(n-1)) after all, in order, sets
// their To, and returns the result. A part still in its window is moved within all's storage,
// if at all; one that outgrew its window is copied. Parts left of their window move first,
// from the left, then those right of theirs from the right, then the copies: no part is
// overwritten before it is moved.
func Join[T any](all []T, n int, part func(i int) *Part[T]) []T {
	end := len(all)
	for i := range n {
		p := part(i)
		p.To = end
		end += len(p.S)
	}
	if end > cap(all) { // the parts outgrew the storage
		out := make([]T, len(all), end)
		copy(out, all)
		for i := range n {
			out = append(out, part(i).S...)
		}
		return out
	}
	full := all[:cap(all)]
	inPlace := func(p *Part[T]) bool {
		return len(p.S) > 0 && p.At < len(full) && &p.S[0] == &full[p.At]
	}
	for i := range n {
		if p := part(i); inPlace(p) && p.To < p.At {
			copy(full[p.To:], p.S)
		}
	}
	for i := n - 1; i >= 0; i-- {
		if p := part(i); inPlace(p) && p.To > p.At {
			copy(full[p.To:], p.S)
		}
	}
	for i := range n {
		if p := part(i); !inPlace(p) {
			copy(full[p.To:], p.S)
		}
	}
	clear(full[end:]) // what parts moved away from
	return full[:end]
}
