package view

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAs(t *testing.T) {
	t.Parallel()
	b := []int32{0x00020001, 0x00040003}
	s := As[int16](b, Fits[int16](b))
	assert.Equal(t, []int16{1, 2, 3, 4}, s, "little-endian halves")
	s[0] = 9
	assert.Equal(t, int32(0x00020009), b[0], "a view, not a copy")

	pairs := As[[2]int32](b, 1)
	assert.Equal(t, [][2]int32{{0x00020009, 0x00040003}}, pairs)

	assert.Nil(t, As[int16]([]int32(nil), 0))
	assert.Panics(t, func() { As[int64](b, 2) }, "16 bytes do not fit in 8")
	assert.Panics(t, func() { As[int16](b, -1) })
}

func TestLen(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 0, Len[int64, int32](0))
	assert.Equal(t, 6, Len[int64, int32](3), "8 bytes take two words")
	assert.Equal(t, 2, Len[int16, int32](3), "6 bytes take two words, rounded up")
	assert.Equal(t, 1, Len[[3]byte, int64](2))
	b := make([]int32, Len[[3]int16, int32](5))
	assert.Len(t, As[[3]int16](b, 5), 5, "the array holds the view")
}
