// Package minheap is a binary min-heap of values under a less function: the event queue of
// predict's simulator and the ready sets of the checker's searches. It is container/heap's
// algorithm without its interface: container/heap boxes every value pushed or popped, which
// costs an allocation per event (predict's ring allreduce at 256 ranks: ten times the
// allocations and 20% more CPU).
package minheap

import "cmp"

// Heap holds values of T, the least under its less function on top. Make one with New.
type Heap[T any] struct {
	a    []T
	less func(x, y *T) bool
}

// New returns an empty heap ordered by less. Values that neither is less than the other come
// out in no particular order: a caller that needs a fixed order makes less total.
func New[T any](less func(x, y *T) bool) *Heap[T] {
	return &Heap[T]{less: less}
}

// NewOrdered returns an empty heap of T ordered by <.
func NewOrdered[T cmp.Ordered]() *Heap[T] {
	return New(func(x, y *T) bool { return *x < *y })
}

// Len is the number of values in the heap.
func (h *Heap[T]) Len() int { return len(h.a) }

// Push adds x.
func (h *Heap[T]) Push(x T) {
	h.a = append(h.a, x)
	h.up(len(h.a) - 1)
}

// Min is the least value, which stays in the heap. The heap must not be empty.
func (h *Heap[T]) Min() T { return h.a[0] }

// Pop removes and returns the least value. The heap must not be empty.
func (h *Heap[T]) Pop() T {
	a := h.a
	top := a[0]
	n := len(a) - 1
	last := a[n]
	a = a[:n]
	h.a = a
	if n == 0 {
		return top
	}
	// The hole at the root goes down to a leaf along the lesser children, one comparison a
	// level; the last value fills it and goes up, mostly not far: fewer calls of less than
	// sifting the last value down from the root, which takes two a level.
	i := 0
	for l := 1; l < n; l = 2*i + 1 {
		if r := l + 1; r < n && h.less(&a[r], &a[l]) {
			l = r
		}
		a[i] = a[l]
		i = l
	}
	a[i] = last
	h.up(i)
	return top
}

// up moves the value at i up to its place.
func (h *Heap[T]) up(i int) {
	a := h.a
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(&a[i], &a[p]) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}
