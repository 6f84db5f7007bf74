// Package view reinterprets the array of a slice as elements of another plain type, so that a
// pass can reuse one large allocation for a differently shaped table once it is done with the
// first (the race search's accesses live in an []int32, the reachability labels in the arrays
// the happens-before graph lets go of). The planner's passes view arrays only through it.
//
// Both element types must hold no pointers (the garbage collector would not see them through
// the view); the view keeps the array alive.
package view

import (
	"fmt"
	"unsafe"
)

// As views the array of b as n elements of type T. It panics when n elements of T do not fit in
// b's array (len(b) elements of E): that is a bug of the caller, never of the input.
func As[T, E any](b []E, n int) []T {
	if n == 0 {
		return nil // an empty b may be no allocation of its own: nothing to view
	}
	var t T
	var e E
	if n < 0 || uintptr(n)*unsafe.Sizeof(t) > uintptr(len(b))*unsafe.Sizeof(e) {
		panic(fmt.Sprintf("view: %d elements of %d bytes do not fit in %d of %d bytes", n, unsafe.Sizeof(t), len(b), unsafe.Sizeof(e)))
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// Fits reports how many elements of T fit in the array of b.
func Fits[T, E any](b []E) int {
	var t T
	var e E
	return int(uintptr(len(b)) * unsafe.Sizeof(e) / unsafe.Sizeof(t))
}

// Len reports how many elements of E hold n elements of T, so that an array of E can be made
// for a view of n elements of T (rounded up: the view must fit).
func Len[T, E any](n int) int {
	var t T
	var e E
	return int((uintptr(n)*unsafe.Sizeof(t) + unsafe.Sizeof(e) - 1) / unsafe.Sizeof(e))
}
