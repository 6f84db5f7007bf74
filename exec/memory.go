package exec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/coredag/coredag/ir"
)

// cacheLine is the alignment of every buffer: NICs and CPUs both move whole lines.
const cacheLine = 64

// Memory is the contents of every buffer on every rank: one byte image per rank per buffer,
// elements little-endian. Buffers are cache-line aligned.
type Memory struct {
	g    *ir.Graph
	bufs [][][]byte // [rank][buffer]
}

// NewMemory allocates zeroed, cache-line aligned images of every buffer of g on every rank.
func NewMemory(g *ir.Graph) *Memory {
	m := &Memory{g: g, bufs: make([][][]byte, g.Ranks)}
	for r := 0; r < g.Ranks; r++ {
		m.bufs[r] = allocRank(g)
	}
	return m
}

// slabBytes is the size of one rank's slab: every buffer rounded up to a cache line.
func slabBytes(g *ir.Graph) int64 {
	var total int64
	for i := range g.Buffers {
		total += roundUp(g.Buffers[i].Bytes(), cacheLine)
	}
	return total
}

// rankBytes is what allocRank allocates for one rank (Estimate counts with it).
func rankBytes(g *ir.Graph) int64 { return alignedSize(slabBytes(g)) }

// allocRank allocates one rank's buffers out of one slab, each aligned to a cache line.
func allocRank(g *ir.Graph) [][]byte {
	slab := alignedBytes(slabBytes(g))
	out := make([][]byte, len(g.Buffers))
	var off int64
	for i := range g.Buffers {
		n := g.Buffers[i].Bytes()
		out[i] = slab[off : off+n : off+n]
		off += roundUp(n, cacheLine)
	}
	return out
}

func roundUp(n, a int64) int64 { return (n + a - 1) / a * a }

// alignedSize is what alignedBytes(n) allocates.
func alignedSize(n int64) int64 { return n + cacheLine }

// alignedBytes returns n zeroed bytes starting on a cache-line boundary.
func alignedBytes(n int64) []byte {
	raw := make([]byte, alignedSize(n))
	skip := int64(0)
	if len(raw) > 0 {
		if mis := int64(uintptr(unsafe.Pointer(&raw[0])) % cacheLine); mis != 0 {
			skip = cacheLine - mis
		}
	}
	return raw[skip : skip+n : skip+n]
}

// NewMemoryFrom wraps existing buffer images: bufs[rank][buffer] must have each buffer's size in
// bytes and be aligned to its element size. A nil bufs[rank] means the rank is not held here (a
// process that runs only its own rank); such ranks are skipped by ResetAll and Diff.
func NewMemoryFrom(g *ir.Graph, bufs [][][]byte) (*Memory, error) {
	if len(bufs) != g.Ranks {
		return nil, fmt.Errorf("memory for %d ranks, the plan has %d", len(bufs), g.Ranks)
	}
	for r, rb := range bufs {
		if rb == nil {
			continue
		}
		if len(rb) != len(g.Buffers) {
			return nil, fmt.Errorf("rank %d: %d buffers, the plan has %d", r, len(rb), len(g.Buffers))
		}
		for i := range g.Buffers {
			if int64(len(rb[i])) != g.Buffers[i].Bytes() {
				return nil, fmt.Errorf("rank %d buffer %s: %d bytes, needs %d", r, g.Buffers[i].Name, len(rb[i]), g.Buffers[i].Bytes())
			}
		}
	}
	return &Memory{g: g, bufs: bufs}, nil
}

// HasRank reports whether m holds rank's buffers.
func (m *Memory) HasRank(rank int) bool {
	return rank >= 0 && rank < len(m.bufs) && m.bufs[rank] != nil
}

// Graph returns the graph whose buffers m holds.
func (m *Memory) Graph() *ir.Graph { return m.g }

// Bytes returns rank's image of buffer b. The slice aliases the memory.
func (m *Memory) Bytes(rank int, b ir.BufID) []byte { return m.bufs[rank][b] }

// SliceBytes returns the bytes of slice s on rank, or an error naming the slice when it is out
// of the buffer's bounds.
func (m *Memory) SliceBytes(rank int, s ir.Slice) ([]byte, error) {
	if !s.Valid() {
		return nil, nil
	}
	if int(s.Buf) >= len(m.g.Buffers) || s.Buf < 0 {
		return nil, fmt.Errorf("slice names buffer #%d, which does not exist", s.Buf)
	}
	b := &m.g.Buffers[s.Buf]
	if s.Off < 0 || s.Len < 0 || s.Off+s.Len > b.Count {
		return nil, fmt.Errorf("slice %s[%d:%d] is out of bounds of %s (%d elements)", b.Name, s.Off, s.Off+s.Len, b.Name, b.Count)
	}
	sz := b.Type.Size()
	return m.bufs[rank][s.Buf][s.Off*sz : (s.Off+s.Len)*sz], nil
}

// Reset fills rank's buffers with their init values (zero when a buffer has no init).
func (m *Memory) Reset(rank int) error {
	for i := range m.g.Buffers {
		if err := initBuffer(&m.g.Buffers[i], rank, m.bufs[rank][i]); err != nil {
			return err
		}
	}
	return nil
}

// initWords fills, on each of ranks, the buffers that hold the word of a wait (wait WORD >=
// VALUE) with their init values: check proved each such wait from where its word starts. Such
// a buffer is coredag's own (check refuses an extern one, and so does the library's
// Options.Extern); one that is extern all the same is the caller's, and left alone.
func (m *Memory) initWords(ranks []int) error {
	for b, w := range m.g.WordWaits() {
		if w == ir.None || m.g.Buffers[b].Extern {
			continue
		}
		for _, r := range ranks {
			if err := initBuffer(&m.g.Buffers[b], r, m.bufs[r][b]); err != nil {
				return err
			}
		}
	}
	return nil
}

// ResetAll resets every rank's buffers to their init values.
func (m *Memory) ResetAll() error {
	for r := range m.bufs {
		if m.bufs[r] == nil {
			continue
		}
		if err := m.Reset(r); err != nil {
			return err
		}
	}
	return nil
}

func initBuffer(b *ir.Buffer, rank int, dst []byte) error {
	if b.Init == nil {
		clear(dst)
		return nil
	}
	if err := b.Init(rank, dst); err != nil {
		var ie *ir.InitError
		if errors.As(err, &ie) { // a positioned diagnostic, at the sub-expression that failed
			return ie.Diagnostic(b.Name)
		}
		return fmt.Errorf("%s: init of buffer %s on rank %d: %w", b.Pos, b.Name, rank, err)
	}
	return nil
}

// Elem returns element i of buffer b on rank as a float64 (floats), int64 (signed) or uint64
// (unsigned) value.
func (m *Memory) Elem(rank int, b ir.BufID, i int64) any {
	return elemValue(m.g.Buffers[b].Type, m.bufs[rank][b], i)
}

// Float64s returns buffer b on rank converted to float64, whatever its element type; handy
// for checking results in tests and for printing.
func (m *Memory) Float64s(rank int, b ir.BufID) []float64 {
	t := m.g.Buffers[b].Type
	data := m.bufs[rank][b]
	out := make([]float64, m.g.Buffers[b].Count)
	for i := range out {
		switch v := elemValue(t, data, int64(i)).(type) {
		case float64:
			out[i] = v
		case int64:
			out[i] = float64(v)
		case uint64:
			out[i] = float64(v)
		}
	}
	return out
}

// Values returns buffer b on rank as printable values (float64, int64 or uint64 per element),
// for JSON output.
func (m *Memory) Values(rank int, b ir.BufID) []any {
	t := m.g.Buffers[b].Type
	out := make([]any, m.g.Buffers[b].Count)
	for i := range out {
		out[i] = elemValue(t, m.bufs[rank][b], int64(i))
	}
	return out
}

// Buffer looks a buffer up by name.
func (m *Memory) Buffer(name string) (ir.BufID, bool) { return BufferByName(m.g, name) }

// BufferByName looks a buffer of g up by name.
func BufferByName(g *ir.Graph, name string) (ir.BufID, bool) {
	for i := range g.Buffers {
		if g.Buffers[i].Name == name {
			return ir.BufID(i), true
		}
	}
	return ir.None, false
}

func elemValue(t ir.ElemType, data []byte, i int64) any {
	off := i * t.Size()
	switch t {
	case ir.U8:
		return uint64(data[off])
	case ir.I32:
		return int64(int32(binary.LittleEndian.Uint32(data[off:])))
	case ir.U32:
		return uint64(binary.LittleEndian.Uint32(data[off:]))
	case ir.I64:
		return int64(binary.LittleEndian.Uint64(data[off:]))
	case ir.U64:
		return binary.LittleEndian.Uint64(data[off:])
	case ir.F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(data[off:])))
	default:
		return math.Float64frombits(binary.LittleEndian.Uint64(data[off:]))
	}
}

// Mismatch is the first element where two memories differ on one rank's buffer.
type Mismatch struct {
	Rank   int
	Buffer string
	Index  int64 // element
	Got    any
	Want   any
	Count  int64 // how many elements of this buffer differ
}

func (d Mismatch) String() string {
	more := ""
	if d.Count > 1 {
		more = fmt.Sprintf(" (%d elements differ)", d.Count)
	}
	return fmt.Sprintf("rank %d buffer %s element %d is %v, the reference has %v%s", d.Rank, d.Buffer, d.Index, d.Got, d.Want, more)
}

// Diff compares m (a run's result) with want (the reference) and reports the first differing
// element of every rank's buffer that differs, in rank then buffer order. Both must be of the
// same graph shape. Floats compare bit-exactly, except that any NaN equals any NaN.
func (m *Memory) Diff(want *Memory) []Mismatch {
	var out []Mismatch
	for r := range m.bufs {
		if !m.HasRank(r) || !want.HasRank(r) {
			continue
		}
		for b := range m.g.Buffers {
			buf := &m.g.Buffers[b]
			got, exp := m.bufs[r][b], want.bufs[r][b]
			if bytes.Equal(got, exp) {
				continue
			}
			first, n := int64(-1), int64(0)
			sz := buf.Type.Size()
			for i := int64(0); i < buf.Count; i++ {
				if !elemEqual(buf.Type, got[i*sz:(i+1)*sz], exp[i*sz:(i+1)*sz]) {
					if first < 0 {
						first = i
					}
					n++
				}
			}
			if first >= 0 {
				out = append(out, Mismatch{Rank: r, Buffer: buf.Name, Index: first,
					Got: elemValue(buf.Type, got, first), Want: elemValue(buf.Type, exp, first), Count: n})
			}
		}
	}
	return out
}

func elemEqual(t ir.ElemType, a, b []byte) bool {
	if string(a) == string(b) {
		return true
	}
	switch t {
	case ir.F32:
		return math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(a)))) &&
			math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
	case ir.F64:
		return math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(a))) &&
			math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	return false
}

// DiffError turns a list of mismatches into one error, or nil when the list is empty.
func DiffError(ms []Mismatch) error {
	if len(ms) == 0 {
		return nil
	}
	var sb strings.Builder
	sb.WriteString("memory differs from the reference: ")
	for i, d := range ms {
		if i > 0 {
			sb.WriteString("; ")
		}
		if i == 4 {
			fmt.Fprintf(&sb, "and %d more buffers", len(ms)-i)
			break
		}
		sb.WriteString(d.String())
	}
	return fmt.Errorf("%s", sb.String())
}

// Clone returns a copy of m in the Go heap, holding the same ranks.
func (m *Memory) Clone() *Memory {
	bufs := make([][][]byte, len(m.bufs))
	for r, rb := range m.bufs {
		if rb == nil {
			continue
		}
		bufs[r] = make([][]byte, len(rb))
		for b, data := range rb {
			bufs[r][b] = alignedBytes(int64(len(data)))
			copy(bufs[r][b], data)
		}
	}
	return &Memory{g: m.g, bufs: bufs}
}

// CopyFrom copies every buffer of src into m (same graph shape).
func (m *Memory) CopyFrom(src *Memory) {
	for r := range m.bufs {
		if !src.HasRank(r) {
			continue
		}
		for b := range m.bufs[r] {
			copy(m.bufs[r][b], src.bufs[r][b])
		}
	}
}
