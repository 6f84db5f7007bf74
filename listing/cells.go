package listing

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"

	"github.com/coredag/coredag/internal/decimal"
)

// The cells of the text listing's chains, padded to their column's width: the index cell, counted
// up in place from row to row, and the cells of columns that take few values in a chain, each
// made once and reused.

// indexCell is the index cell of a chain's rows, "    [k]" padded, counted up from row to row.
type indexCell struct {
	text     []byte
	k, width int
	end      int // where "]" is in text
}

// reset starts the count of a chain whose index cells are padded to width.
func (c *indexCell) reset(width int) {
	c.text, c.k, c.width = c.text[:0], -1, width
}

// next is the cell of the next row.
func (c *indexCell) next() []byte {
	c.k++
	// Add one to the digits, carrying; for row 0 and at a new digit, write the cell anew.
	if t := c.text; len(t) > 0 {
		i := c.end - 1
		for ; t[i] == '9'; i-- {
			t[i] = '0'
		}
		if t[i] != '[' {
			t[i]++
			return t
		}
	}
	c.text = decimal.AppendUint(append(c.text[:0], "    ["...), uint64(c.k))
	c.end = len(c.text)
	c.text = pad(append(c.text, ']'), c.width-(c.end+1))
	return c.text
}

// column is the cells of a column that takes few values in a chain (of 0 to maxValue), each
// made once and kept with lead spaces in front: the padding of the cell before it, which is
// lead spaces at most. From its n-th byte on, a cell is what follows a cell before it n bytes
// short of the widest.
type column struct {
	lead, width int    // spaces in front; the width a cell is padded to
	text        []byte // the cells made, back to back
	at          []span // where the cell of each value is in text, if made since the reset
	resets      int32
	spare       []byte // the cell of a value past maxValue, for one row
}

// span is where a cell is in its column's text, and after which reset of the column it was made.
type span struct{ start, end, reset int32 }

// maxValue bounds the values a column keeps cells for.
const maxValue = 1 << 12

// reset empties c for a chain.
func (c *column) reset(lead, width int) {
	c.lead, c.width, c.text = lead, width, c.text[:0]
	c.resets++
}

// cell is the cell of value v, if it was made.
func (c *column) cell(v int) ([]byte, bool) {
	if uint(v) >= uint(len(c.at)) || c.at[v].reset != c.resets {
		return nil, false
	}
	at := c.at[v]
	return c.text[at.start:at.end:at.end], true
}

// add makes the cell of value v of column c, whose text is s. Past maxValue, it is made for
// this row only, in c.spare.
func add[T string | []byte](c *column, v int, s T) []byte {
	if uint(v) > maxValue {
		c.spare = pad(append(pad(c.spare[:0], c.lead), s...), c.width-len(s))
		return c.spare
	}
	start := len(c.text)
	c.text = pad(append(pad(c.text, c.lead), s...), c.width-len(s))
	for len(c.at) <= v {
		c.at = append(c.at, span{})
	}
	c.at[v] = span{int32(start), int32(len(c.text)), c.resets}
	return c.text[start:len(c.text):len(c.text)]
}

// width is the width of s in runes.
func width(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return utf8.RuneCountInString(s)
		}
	}
	return len(s)
}

// spaces is padding, sliced to length.
var spaces = bytes.Repeat([]byte{' '}, 256)

// pad appends n spaces to dst.
func pad(dst []byte, n int) []byte {
	for ; n > len(spaces); n -= len(spaces) {
		dst = append(dst, spaces...)
	}
	return append(dst, spaces[:max(n, 0)]...)
}

// isASCII reports whether b is all ASCII, a word at a time.
func isASCII(b []byte) bool {
	for ; len(b) >= 8; b = b[8:] {
		if binary.LittleEndian.Uint64(b)&0x8080808080808080 != 0 {
			return false
		}
	}
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
