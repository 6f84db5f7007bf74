package ir

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// A compiled plan holds about two WQEs per graph op: their size is most of Compile's memory
// (issue 19 asks for at most 500 B per op). Growing them should be a decision, not an accident.
func TestWQESize(t *testing.T) {
	assert.EqualValues(t, 24, unsafe.Sizeof(Seg{}), "Seg")
	assert.EqualValues(t, 12, unsafe.Sizeof(Cond{}), "Cond")
	assert.EqualValues(t, 104, unsafe.Sizeof(WQE{}), "WQE")
}

// A Graph holds an Op per op of every rank: its size is most of elaboration's memory (issue 19
// asks for at most 300 B per op for `check`).
func TestOpSize(t *testing.T) {
	assert.EqualValues(t, 24, unsafe.Sizeof(Slice{}), "Slice")
	assert.EqualValues(t, 88, unsafe.Sizeof(Op{}), "Op")
}
