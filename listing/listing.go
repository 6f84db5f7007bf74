// Package listing is an output: it writes a compiled ir.Plan as the WQE listing of
// `coredag compile` (per rank and work queue, each entry with its operands, flags and source
// line) or as JSON (docs/compile-json.md). It reads the Plan only; package viz beside it draws.
package listing

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/decimal"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
)

// Options selects what a listing shows.
type Options struct {
	Rank int // only this rank; -1 for all
}

// Write writes the text listing of a Plan: per rank and work queue, each WQE's index,
// opcode, operands, flags, and the op and file:line it came from; WAITs say in words what they
// wait for. A summary ends it.
//
// The listing is streamed rank by rank through a buffered writer over w: ranks are rendered on
// every CPU, a few ahead of the one being written, and written in rank order, so memory holds
// a few ranks' text, never the whole of it.
func Write(w io.Writer, p *ir.Plan, opt Options) error {
	return NewWriter(w, opt).writeAll(p)
}

// writeAll writes every rank of p, then closes the listing.
func (lw *Writer) writeAll(p *ir.Plan) error {
	workers := min(runtime.GOMAXPROCS(0), len(p.Ranks))
	if workers <= 1 || lw.opt.Rank >= 0 {
		for r := range p.Ranks {
			if err := lw.Rank(p, r); err != nil {
				return err
			}
		}
		return lw.Close(p)
	}
	// Workers take the ranks in order, each once it holds one of the window's slots; the rank
	// written next is always taken or free to take, so every wait below ends.
	ready := make([]chan *Block, len(p.Ranks))
	for r := range ready {
		ready[r] = make(chan *Block, 1)
	}
	window := make(chan struct{}, 2*workers)
	done := make(chan struct{})
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case window <- struct{}{}:
				case <-done:
					return
				}
				r := int(next.Add(1) - 1)
				if r >= len(ready) {
					return
				}
				ready[r] <- lw.Render(p, r)
			}
		})
	}
	defer func() {
		close(done)
		wg.Wait()
	}()
	for r := range ready {
		b := <-ready[r]
		<-window
		if err := lw.Emit(p, b); err != nil {
			return err
		}
	}
	return lw.Close(p)
}

// Writer writes the listing of Write (or WriteJSON) a rank at a time, for a Plan whose ranks
// are not all held at once (lower.CompileEach): every rank's block in rank order, then Close.
// A block can be rendered apart from its writing (Render, then Emit), for ranks rendered at
// once on several goroutines and written in order.
type Writer struct {
	w       io.Writer // under b
	b       *bufio.Writer
	opt     Options
	json    bool
	started bool
	ranks   int // ranks written
	err     error
	blocks  sync.Pool // of *Block
}

// Block is the text of one rank's block of a listing, rendered and not yet written. Blocks are
// reused from rank to rank, with the memory they grew.
type Block struct {
	text []byte
	err  error
	// The operands of the chain being written, back to back, the end of each in operands, and
	// the width of each in runes.
	operands     []byte
	ends, widths []int
	// The cells of the chain's index, opcode and flags columns, and its file cell.
	index                 indexCell
	opcodes, flags, lines column
	line                  []byte // the text of a cell of lines
	names                 fileNames
}

// NewWriter returns a Writer of the text listing to w.
func NewWriter(w io.Writer, opt Options) *Writer {
	lw := &Writer{w: w, b: bufio.NewWriterSize(w, 1<<20), opt: opt}
	lw.blocks.New = func() any { return &Block{} }
	return lw
}

// NewJSONWriter returns a Writer of the JSON listing to w.
func NewJSONWriter(w io.Writer, opt Options) *Writer {
	lw := NewWriter(w, opt)
	lw.json = true
	return lw
}

// start writes what comes before the ranks, once.
func (lw *Writer) start(p *ir.Plan) {
	if lw.started {
		return
	}
	lw.started = true
	if lw.json {
		doc, at, err := jsonDoc(p)
		if err != nil {
			lw.err = err
			return
		}
		lw.b.Write(doc[:at])
		return
	}
	t := p.Target
	fmt.Fprintf(lw.b, "plan %s  target %s (%s style, cross-channel %s)  ranks %d\n", p.Graph.Name, t.Name, t.Style, yesNo(t.CrossChannel), p.Graph.Ranks)
	sep := "extern buffers (the caller's memory): "
	for i := range p.Graph.Buffers {
		if b := &p.Graph.Buffers[i]; b.Extern {
			fmt.Fprintf(lw.b, "%s%s %s[%d]", sep, b.Name, b.Type, b.Count)
			sep = ", "
		}
	}
	if sep == ", " {
		lw.b.WriteByte('\n')
	}
}

// Rank writes rank r's block of the listing (nothing if the Options leave it out), and returns
// the first error so far.
func (lw *Writer) Rank(p *ir.Plan, r int) error {
	return lw.Emit(p, lw.Render(p, r))
}

// Render renders rank r's block of the listing (empty if the Options leave it out). It may be
// called for several ranks at once.
func (lw *Writer) Render(p *ir.Plan, r int) *Block {
	b := lw.blocks.Get().(*Block)
	b.text = b.text[:0]
	b.err = nil
	switch {
	case lw.opt.Rank >= 0 && r != lw.opt.Rank:
	case lw.json:
		buf := bytes.NewBuffer(b.text)
		enc := json.NewEncoder(buf)
		enc.SetIndent("    ", "  ")
		b.err = enc.Encode(rankJSON(p, r))
		b.text = bytes.TrimRight(buf.Bytes(), "\n")
	default:
		b.text = b.writeRank(b.text, p, r)
	}
	return b
}

// Emit writes a rendered block, after the blocks emitted before it, and returns the first error
// so far.
func (lw *Writer) Emit(p *ir.Plan, b *Block) error {
	lw.start(p)
	if lw.err == nil {
		lw.err = b.err
	}
	if lw.err != nil {
		return lw.err
	}
	if len(b.text) > 0 {
		if lw.json {
			if lw.ranks > 0 {
				lw.b.WriteByte(',')
			}
			lw.b.WriteString("\n    ")
		}
		if len(b.text) < directWrite {
			lw.b.Write(b.text)
		} else if lw.err = lw.b.Flush(); lw.err == nil { // not copied through the buffer
			_, lw.err = lw.w.Write(b.text)
		}
		lw.ranks++
	}
	if cap(b.text) <= 16<<20 {
		lw.blocks.Put(b)
	}
	if lw.err != nil {
		return lw.err
	}
	_, err := lw.b.Write(nil) // the first write error, if any
	return err
}

// directWrite is the length from which a block is written to the Writer's io.Writer as it is,
// not copied into its buffer first.
const directWrite = 64 << 10

// Close writes what follows the ranks (the summary of p's Stats) and flushes the listing.
func (lw *Writer) Close(p *ir.Plan) error {
	lw.start(p)
	if lw.err != nil {
		return lw.err
	}
	if lw.json {
		doc, at, err := jsonDoc(p)
		if err != nil {
			return err
		}
		if lw.ranks > 0 {
			lw.b.WriteString("\n  ")
		}
		lw.b.Write(doc[at:])
		lw.b.WriteByte('\n') // as json.Encoder ends a value
		return lw.b.Flush()
	}
	fmt.Fprintf(lw.b, "\nsummary: %s\n", summary(p.Stats))
	if lim, ok := p.CounterLimit(); ok {
		fmt.Fprintf(lw.b, "triggered: %s\n", overflowText(lim, true))
	}
	return lw.b.Flush() // the first write error, if any
}

// writeRank appends rank r's block of the text listing to dst.
func (b *Block) writeRank(dst []byte, p *ir.Plan, r int) []byte {
	rp := &p.Ranks[r]
	dst = fmt.Appendf(dst, "\nrank %d\n", r)
	for wi := range rp.Queues {
		q := &rp.Queues[wi]
		dst = fmt.Appendf(dst, "  %s  %s", q.Name, q.Kind)
		if q.Managed {
			dst = append(dst, ", managed"...)
		}
		dst = fmt.Appendf(dst, ", depth %d", q.Depth)
		if q.CQ >= 0 {
			cq := &rp.CQs[q.CQ]
			dst = fmt.Appendf(dst, ", cq %s (%d per iteration)", cq.Name, cq.PerIteration)
		}
		dst = fmt.Appendf(dst, ", %s per iteration\n", english.Plural(int(q.PerIteration), "WQE"))
		if len(q.Chain) == 0 {
			dst = append(dst, "    (empty)\n"...)
			continue
		}
		dst = b.writeChain(dst, p, rp, q.Chain)
	}
	if rp.Trig != nil {
		buf := bytes.NewBuffer(dst)
		writeTriggered(buf, p, rp)
		dst = buf.Bytes()
	}
	s := p.RankStats(r)
	return fmt.Appendf(dst, "  rank %d: %s (%d data), %s, %s, %s, %s, %s, %d signalled\n",
		r, english.Plural(s.WQEs, "WQE"), s.DataWQEs, english.Plural(s.HostSteps, "HOST step"), english.Plural(s.Waits, "WAIT"),
		english.Plural(s.Enables, "ENABLE"), english.Plural(s.HostWaits, "host wait"), english.Plural(s.Fences, "fence"), s.Signalled)
}

// flagTexts are the texts of every combination of WQE flags.
var flagTexts = func() (s [8]string) {
	for f := range s {
		s[f] = ir.Flags(f).String()
	}
	return s
}()

// flagText is f.String(), without building it.
func flagText(f ir.Flags) string {
	if int(f) < len(flagTexts) {
		return flagTexts[f]
	}
	return f.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// fileNames remembers the name of the file last looked up: a listing names the same file again
// and again, and diag.FileID.Name takes a lock.
type fileNames struct {
	id   diag.FileID
	name string
}

// lookup is the name of file id.
func (f *fileNames) lookup(id diag.FileID) string {
	if id != f.id {
		f.id, f.name = id, id.Name()
	}
	return f.name
}

func summary(s ir.Stats) string {
	return fmt.Sprintf("%s (%d data), %s, WAITs %d naive -> %d, ENABLEs %d naive -> %d, %s, %s, %d signalled, critical path %s",
		english.Plural(s.WQEs, "WQE"), s.DataWQEs, english.Plural(s.HostSteps, "HOST step"), s.NaiveWaits, s.Waits, s.NaiveEnables, s.Enables,
		english.Plural(s.HostWaits, "host wait"), english.Plural(s.Fences, "fence"), s.Signalled, english.Plural(s.CriticalPath, "op"))
}

// appendCond appends condition c in words: "<cq> >= <count>  (<op> done)".
func appendCond(dst []byte, p *ir.Plan, rp *ir.RankPlan, c ir.Cond) []byte {
	name := "?"
	if c.CQ >= 0 && int(c.CQ) < len(rp.CQs) {
		name = rp.CQs[c.CQ].Name
	}
	who := "?"
	if c.Op >= 0 && int(c.Op) < len(p.Graph.Ops) {
		who = p.Graph.Ops[c.Op].Name
	}
	dst = append(append(dst, name...), " >= "...)
	dst = decimal.AppendUint(dst, uint64(c.Count))
	return append(append(append(dst, "  ("...), who...), " done)"...)
}

// appendOperands appends a WQE's operands in words.
func appendOperands(dst []byte, p *ir.Plan, rp *ir.RankPlan, e *ir.WQE) []byte {
	g := p.Graph
	sl := g.AppendSlice
	num := decimal.AppendInt
	rank := func(dst []byte, r int32) []byte { return num(append(dst, "rank "...), int64(r)) }
	// The local operand: one slice, or a scatter/gather list ("{a[0:4], a[8:12]} 2 SGEs"), and
	// its size in bytes.
	more := p.More(e)
	local := func(dst []byte) []byte {
		if len(more) == 0 {
			return sl(dst, e.Local.Slice())
		}
		dst = sl(append(dst, '{'), e.Local.Slice())
		for _, x := range more {
			dst = sl(append(dst, ", "...), x)
		}
		return append(num(append(dst, "} "...), int64(1+len(more))), " SGEs"...)
	}
	size := func(dst []byte) []byte {
		n := g.Bytes(e.Local.Slice()) + g.SegsBytes(more)
		return append(num(append(dst, " ("...), n), " B)"...)
	}
	switch e.Opcode {
	case ir.OpcSend:
		if !e.Local.Valid() {
			return rank(append(dst, "empty message to "...), e.Peer)
		}
		return rank(append(size(local(dst)), " to "...), e.Peer)
	case ir.OpcRecv:
		if !e.Local.Valid() {
			return rank(append(dst, "no buffer, from "...), e.Peer)
		}
		return rank(append(size(local(append(dst, "into "...))), " from "...), e.Peer)
	case ir.OpcWrite, ir.OpcWriteImm:
		dst = rank(append(local(dst), " to "...), e.Peer)
		return size(sl(append(dst, ' '), e.Remote.Slice()))
	case ir.OpcRead:
		dst = sl(append(rank(dst, e.Peer), ' '), e.Remote.Slice())
		return size(local(append(dst, " into "...)))
	case ir.OpcAtomicFAdd, ir.OpcAtomicCAS:
		dst = sl(append(rank(dst, e.Peer), ' '), e.Remote.Slice())
		if e.Opcode == ir.OpcAtomicFAdd {
			dst = num(append(dst, " += "...), p.OpOf(e).A())
		} else {
			dst = num(append(num(append(dst, ": if "...), p.OpOf(e).A()), " then "...), p.OpOf(e).B())
		}
		if e.Local.Valid() {
			dst = sl(append(dst, ", old into "...), e.Local.Slice())
		}
		return dst
	case ir.OpcNop:
		return append(append(append(dst, "signal "...), p.OpOf(e).Name...), " done"...)
	case ir.OpcWait:
		return appendCond(append(dst, "wait "...), p, rp, e.Wait)
	case ir.OpcSendEnable, ir.OpcRecvEnable:
		name := "?"
		if e.Queue >= 0 && int(e.Queue) < len(rp.Queues) {
			name = rp.Queues[e.Queue].Name
		}
		dst = append(append(append(dst, "enable "...), name...), " up to "...)
		return decimal.AppendUint(dst, uint64(e.UpTo))
	case ir.OpcHost:
		op := &g.Ops[e.Op]
		switch op.Kind {
		case ir.OpReduce:
			dst = append(append(append(dst, "reduce "...), op.Red.String()...), ' ')
			dst = sl(append(sl(dst, op.Dst), " from "...), op.Src)
		case ir.OpCopy:
			dst = sl(append(sl(append(dst, "copy "...), op.Src), " to "...), op.Dst)
		default:
			dst = append(dst, op.Kind.String()...)
		}
		for i, c := range e.Waits {
			if i == 0 {
				dst = append(dst, "; after "...)
			} else {
				dst = append(dst, ", "...)
			}
			dst = appendCond(dst, p, rp, c)
		}
		return dst
	}
	return dst
}

// writeChain appends the rows of a work queue's chain to dst, one line per WQE: its index,
// opcode, operands, flags, op name and file:line, each cell but the last padded with spaces to
// its column's widest cell plus 2 (as text/tabwriter pads, with padding 2 and no minimum
// width). The operands alone are rendered ahead, to learn their widths; the widths of the other
// columns are known from the WQEs, so their cells are written once, in place. The opcode, flags
// and file cells take few values in a chain: each is made once per chain, padded, and the
// flags and file cells with the padding of the cell before them in front (see column); the
// index cell is counted up in place. So a row is a few copies.
func (b *Block) writeChain(dst []byte, p *ir.Plan, rp *ir.RankPlan, chain []ir.WQE) []byte {
	b.operands, b.ends = b.operands[:0], b.ends[:0]
	wOpcode, wOperands, wFlags, wName := 0, 0, 0, 0
	var site *ir.Site // of the row before
	for k := range chain {
		e := &chain[k]
		b.operands = appendOperands(b.operands, p, rp, e)
		b.ends = append(b.ends, len(b.operands))
		wOpcode = max(wOpcode, len(e.Opcode.String())) // opcodes and flags are ASCII
		wFlags = max(wFlags, len(flagText(e.Flags)))
		if s := p.OpOf(e).Site; s != site {
			site = s
			wName = max(wName, width(s.Name))
		}
	}
	// The operands' widths: their lengths in bytes when all are ASCII, as they nearly always are.
	ascii := isASCII(b.operands)
	b.widths = b.widths[:0]
	start := 0
	for _, end := range b.ends {
		w := end - start
		if !ascii {
			w = utf8.RuneCount(b.operands[start:end])
			b.widths = append(b.widths, w)
		}
		wOperands = max(wOperands, w)
		start = end
	}
	b.index.reset(len("    []") + decimal.Len(uint64(len(chain)-1)) + 2)
	b.opcodes.reset(0, wOpcode+2)
	b.flags.reset(wOperands+2, wFlags+2)
	b.lines.reset(wName+2, 0)
	file := diag.FileID(0) // of the cells in b.lines
	start = 0
	for k := range chain {
		e := &chain[k]
		op := p.OpOf(e)
		dst = append(dst, b.index.next()...)
		cell, ok := b.opcodes.cell(int(e.Opcode))
		if !ok {
			cell = add(&b.opcodes, int(e.Opcode), e.Opcode.String())
		}
		dst = append(dst, cell...)
		end := b.ends[k]
		dst = append(dst, b.operands[start:end]...)
		w := end - start
		if !ascii {
			w = b.widths[k]
		}
		start = end
		if cell, ok = b.flags.cell(int(e.Flags)); !ok {
			cell = add(&b.flags, int(e.Flags), flagText(e.Flags))
		}
		dst = append(dst, cell[w:]...)
		// The name, then "file:line" or "-" for no position: a cell of the lines column, by
		// line, for the file of the row before.
		dst = append(dst, op.Name...)
		pos := op.Pos
		if !pos.IsValid() {
			pos = diag.Pos{}
		}
		if pos.File != file {
			b.lines.reset(wName+2, 0)
			file = pos.File
		}
		if cell, ok = b.lines.cell(int(pos.Line)); !ok {
			text := append(b.line[:0], '-')
			if pos.IsValid() {
				text = decimal.AppendUint(append(append(text[:0], b.names.lookup(pos.File)...), ':'), uint64(pos.Line))
			}
			b.line = append(text, '\n')
			cell = add(&b.lines, int(pos.Line), b.line)
		}
		dst = append(dst, cell[width(op.Name):]...)
	}
	return dst
}

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

// The JSON listing. Its shape is documented in docs/compile-json.md and kept stable: fields are
// only ever added.

type jsonPlan struct {
	Version int          `json:"version"`
	Plan    string       `json:"plan"`
	File    string       `json:"file"`
	Params  []jsonParam  `json:"params"`
	Buffers []jsonBuffer `json:"buffers"`
	Target  jsonTarget   `json:"target"`
	Ranks   []jsonRank   `json:"ranks"`
	Stats   jsonStats    `json:"stats"`
	// CounterLimit, on triggered targets, is the counter that overflows first; absent when none
	// grows.
	CounterLimit *jsonCounterLimit `json:"counter_limit,omitempty"`
}

type jsonParam struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

type jsonBuffer struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Count  int64    `json:"count"`
	Bytes  int64    `json:"bytes"`
	Access []string `json:"access"`
	Extern bool     `json:"extern"`
}

type jsonTarget struct {
	Name         string `json:"name"`
	Style        string `json:"style"`
	CrossChannel bool   `json:"cross_channel"`
	PrePost      bool   `json:"pre_post"`
	MaxWQDepth   int    `json:"max_wq_depth"`
	MaxCQDepth   int    `json:"max_cq_depth"`
	MaxInline    int    `json:"max_inline"`
	MaxSGE       int    `json:"max_sge"`
	CanCalc      bool   `json:"can_calc"`
	// Trigger is the profile of a triggered target.
	Trigger *TriggerProfileJSON `json:"trigger,omitempty"`
}

// TriggerProfileJSON is a target's ir.TriggerProfile in JSON (docs/compile-json.md), as
// `coredag compile --format json` and `coredag targets --json` print it.
type TriggerProfileJSON struct {
	Provider          string   `json:"provider"`
	MaxOutstanding    int      `json:"max_outstanding"`
	CounterWorkCost   int      `json:"counter_work_cost"`
	MaxCounters       int      `json:"max_counters"`
	MaxCounter        uint64   `json:"max_counter"`
	RecvThresholdZero bool     `json:"recv_threshold_zero"`
	Guesses           []string `json:"guesses"`
	Source            string   `json:"source"`
}

// NewTriggerProfileJSON is the JSON form of p (nil for nil).
func NewTriggerProfileJSON(p *ir.TriggerProfile) *TriggerProfileJSON {
	if p == nil {
		return nil
	}
	return &TriggerProfileJSON{Provider: p.Provider, MaxOutstanding: p.MaxOutstanding, CounterWorkCost: p.WorkCost(),
		MaxCounters: p.MaxCounters, MaxCounter: p.MaxCounter, RecvThresholdZero: p.RecvThresholdZero,
		Guesses: p.Guesses.Names(), Source: p.Source}
}

type jsonRank struct {
	Rank    int          `json:"rank"`
	Queues  []jsonQueue  `json:"queues"`
	CQs     []jsonCQ     `json:"cqs"`
	Trigger *jsonTrigger `json:"trigger,omitempty"`
}

// jsonTrigger is a rank's triggered form: counters, triggered work, and its cost.
type jsonTrigger struct {
	Counters []jsonCounter   `json:"counters"`
	Work     []jsonTrigEntry `json:"work"`
	Summary  jsonTrigSummary `json:"summary"`
}

type jsonCounter struct {
	Index        int     `json:"index"`
	Name         string  `json:"name"`
	Kind         string  `json:"kind"`
	Queue        string  `json:"queue,omitempty"`
	Op           string  `json:"op,omitempty"`
	PerIteration uint64  `json:"per_iteration"`
	Iterations   *uint64 `json:"iterations,omitempty"`
}

type jsonTrigEntry struct {
	Index     int          `json:"index"`
	Kind      string       `json:"kind"`
	Op        string       `json:"op"`
	Pos       string       `json:"pos"`
	Counter   string       `json:"counter,omitempty"`
	Threshold *uint64      `json:"threshold,omitempty"`
	Cause     string       `json:"cause,omitempty"`
	Units     int          `json:"units"`
	WQE       *jsonTrigWQE `json:"wqe,omitempty"`
	Target    string       `json:"target,omitempty"`
	Value     *uint64      `json:"value,omitempty"`
}

type jsonTrigWQE struct {
	Queue  string `json:"queue"`
	Index  int    `json:"index"`
	Opcode string `json:"opcode"`
}

type jsonTrigSummary struct {
	Counters     int               `json:"counters"`
	Outstanding  int               `json:"outstanding"`
	Units        int               `json:"units"`
	CounterLimit *jsonCounterLimit `json:"counter_limit,omitempty"`
}

type jsonCounterLimit struct {
	Rank         int    `json:"rank"`
	Counter      string `json:"counter"`
	PerIteration uint64 `json:"per_iteration"`
	MaxCounter   uint64 `json:"max_counter"`
	Iterations   uint64 `json:"iterations"`
}

func counterLimitJSON(l ir.CounterLimit) *jsonCounterLimit {
	if l.Iterations == ir.NoIterationLimit {
		return nil
	}
	return &jsonCounterLimit{Rank: l.Rank, Counter: l.Name, PerIteration: l.PerIteration, MaxCounter: l.Max, Iterations: l.Iterations}
}

// trigJSON is the JSON form of rank plan rp's triggered work.
func trigJSON(p *ir.Plan, rp *ir.RankPlan) *jsonTrigger {
	g, tr, prof := p.Graph, rp.Trig, p.Target.Trigger
	out := &jsonTrigger{Counters: []jsonCounter{}, Work: []jsonTrigEntry{}}
	for i := range tr.Counters {
		c := &tr.Counters[i]
		jc := jsonCounter{Index: i, Name: c.Name, Kind: c.Kind.String(), PerIteration: c.PerIteration}
		if c.Queue >= 0 {
			jc.Queue = rp.Queues[c.Queue].Name
		}
		if c.Op != ir.None {
			jc.Op = g.Ops[c.Op].Name
		}
		if n := tr.Iterations(i, prof.MaxCounter); n != ir.NoIterationLimit {
			jc.Iterations = &n
		}
		out.Counters = append(out.Counters, jc)
	}
	for k := range tr.Work {
		w := &tr.Work[k]
		je := jsonTrigEntry{Index: k, Kind: w.Kind.String(), Op: w.Name, Pos: w.Pos.String(), Units: prof.Units(rp, w)}
		if w.Counter != ir.Untriggered {
			thr := w.Threshold
			je.Counter, je.Threshold = tr.Counters[w.Counter].Name, &thr
		}
		if w.Cause != ir.None {
			je.Cause = g.Ops[w.Cause].Name
		}
		if w.Kind == ir.TrigOp {
			e := &rp.Queues[w.Loc.Queue].Chain[w.Loc.Index]
			je.WQE = &jsonTrigWQE{Queue: rp.Queues[w.Loc.Queue].Name, Index: w.Loc.Index, Opcode: e.Opcode.String()}
		} else {
			v := w.Value
			je.Target, je.Value = tr.Counters[w.Target].Name, &v
		}
		out.Work = append(out.Work, je)
	}
	l := prof.Load(rp)
	out.Summary = jsonTrigSummary{Counters: l.Counters, Outstanding: l.Entries, Units: l.Units, CounterLimit: counterLimitJSON(p.RankCounterLimit(rp.Rank))}
	return out
}

type jsonQueue struct {
	Name         string    `json:"name"`
	Kind         string    `json:"kind"`
	Queue        string    `json:"queue,omitempty"`
	CQ           string    `json:"cq,omitempty"`
	Managed      bool      `json:"managed"`
	Depth        int       `json:"depth"`
	PerIteration uint32    `json:"per_iteration"`
	WQEs         []jsonWQE `json:"wqes"`
}

type jsonCQ struct {
	Name         string `json:"name"`
	Queue        string `json:"queue"`
	Depth        int    `json:"depth"`
	PerIteration uint32 `json:"per_iteration"`
}

type jsonSlice struct {
	Buffer string `json:"buffer"`
	Offset int64  `json:"offset"`
	Count  int64  `json:"count"`
	Bytes  int64  `json:"bytes"`
}

type jsonCond struct {
	CQ    string `json:"cq"`
	Count uint32 `json:"count"`
	Op    string `json:"op"`
}

type jsonEnable struct {
	Queue string `json:"queue"`
	UpTo  uint32 `json:"upto"`
}

type jsonWQE struct {
	Index  int         `json:"index"`
	Opcode string      `json:"opcode"`
	Op     string      `json:"op"`
	Pos    string      `json:"pos"`
	Flags  []string    `json:"flags"`
	Peer   *int        `json:"peer,omitempty"`
	Local  *jsonSlice  `json:"local,omitempty"`
	More   []jsonSlice `json:"more,omitempty"`
	Remote *jsonSlice  `json:"remote,omitempty"`
	Source *jsonSlice  `json:"source,omitempty"`
	Add    *int64      `json:"add,omitempty"`
	Cmp    *int64      `json:"compare,omitempty"`
	Swap   *int64      `json:"swap,omitempty"`
	Reduce string      `json:"reduce,omitempty"`
	Wait   *jsonCond   `json:"wait,omitempty"`
	Enable *jsonEnable `json:"enable,omitempty"`
	Waits  []jsonCond  `json:"waits,omitempty"`
}

type jsonStats struct {
	WQEs         int `json:"wqes"`
	DataWQEs     int `json:"data_wqes"`
	HostSteps    int `json:"host_steps"`
	NaiveWaits   int `json:"naive_waits"`
	Waits        int `json:"waits"`
	NaiveEnables int `json:"naive_enables"`
	Enables      int `json:"enables"`
	HostWaits    int `json:"host_waits"`
	Fences       int `json:"fences"`
	Signalled    int `json:"signalled"`
	CriticalPath int `json:"critical_path"`
}

// WriteJSON writes the Plan as JSON (docs/compile-json.md). Every WQE object has an "opcode"
// field holding one of the Opcode names. Like Write, it streams: the document is encoded one rank
// at a time into a buffered writer over w.
func WriteJSON(w io.Writer, p *ir.Plan, opt Options) error {
	return NewJSONWriter(w, opt).writeAll(p)
}

// jsonDoc is the JSON document of p without its ranks, and where they go in it: just before
// the closing bracket of its empty "ranks" list. Each rank is encoded on its own.
func jsonDoc(p *ir.Plan) (doc []byte, at int, err error) {
	g := p.Graph
	t := p.Target
	out := jsonPlan{Version: 1, Plan: g.Name, File: g.File, Params: []jsonParam{}, Ranks: []jsonRank{},
		Target: jsonTarget{Name: t.Name, Style: t.Style.String(), CrossChannel: t.CrossChannel, PrePost: t.PrePost,
			MaxWQDepth: t.MaxWQDepth, MaxCQDepth: t.MaxCQDepth, MaxInline: t.MaxInline, MaxSGE: t.MaxSGE, CanCalc: t.CanCalc,
			Trigger: NewTriggerProfileJSON(t.Trigger)},
		Stats: jsonStats(p.Stats)}
	if lim, ok := p.CounterLimit(); ok {
		out.CounterLimit = counterLimitJSON(lim)
	}
	for _, prm := range g.Params {
		out.Params = append(out.Params, jsonParam{prm.Name, prm.Value})
	}
	out.Buffers = make([]jsonBuffer, len(g.Buffers))
	for i := range g.Buffers {
		b := &g.Buffers[i]
		out.Buffers[i] = jsonBuffer{Name: b.Name, Type: b.Type.String(), Count: b.Count, Bytes: b.Bytes(),
			Access: strings.Fields(b.Access.String()), Extern: b.Extern}
	}
	if doc, err = json.MarshalIndent(out, "", "  "); err != nil {
		return nil, 0, err
	}
	mark := []byte("\n  \"ranks\": []")
	if at = bytes.Index(doc, mark); at < 0 {
		return nil, 0, fmt.Errorf("listing: no ranks in the JSON document")
	}
	return doc, at + len(mark) - 1, nil
}

// rankJSON is the JSON form of rank r's plan.
func rankJSON(p *ir.Plan, r int) jsonRank {
	g := p.Graph
	slice := func(s ir.Slice) *jsonSlice {
		if !s.Valid() {
			return nil
		}
		return &jsonSlice{Buffer: g.Buffers[s.Buf].Name, Offset: s.Off, Count: s.Len, Bytes: g.Bytes(s)}
	}
	rp := &p.Ranks[r]
	jr := jsonRank{Rank: r, Queues: []jsonQueue{}, CQs: []jsonCQ{}}
	cqName := func(i int) string {
		if i < 0 || i >= len(rp.CQs) {
			return ""
		}
		return rp.CQs[i].Name
	}
	cond := func(c ir.Cond) jsonCond {
		return jsonCond{CQ: cqName(int(c.CQ)), Count: c.Count, Op: g.Ops[c.Op].Name}
	}
	for wi := range rp.Queues {
		q := &rp.Queues[wi]
		jq := jsonQueue{Name: q.Name, Kind: q.Kind.String(), CQ: cqName(q.CQ), Managed: q.Managed, Depth: q.Depth,
			PerIteration: q.PerIteration, WQEs: []jsonWQE{}}
		if q.Queue != ir.None {
			jq.Queue = g.Queues[q.Queue].Name
		}
		for k := range q.Chain {
			e := &q.Chain[k]
			op := p.OpOf(e)
			je := jsonWQE{Index: k, Opcode: e.Opcode.String(), Op: op.Name, Pos: op.Pos.String(), Flags: []string{},
				Local: slice(e.Local.Slice()), Remote: slice(e.Remote.Slice())}
			for _, m := range p.More(e) {
				je.More = append(je.More, *slice(m))
			}
			for _, f := range []struct {
				bit  ir.Flags
				name string
			}{{ir.Signalled, "signalled"}, {ir.Fence, "fence"}, {ir.Inline, "inline"}} {
				if e.Flags&f.bit != 0 {
					je.Flags = append(je.Flags, f.name)
				}
			}
			if e.Opcode.IsData() {
				peer := int(e.Peer)
				je.Peer = &peer
			}
			switch e.Opcode {
			case ir.OpcAtomicFAdd:
				a := op.A()
				je.Add = &a
			case ir.OpcAtomicCAS:
				a, b := op.A(), op.B()
				je.Cmp, je.Swap = &a, &b
			case ir.OpcWait:
				c := cond(e.Wait)
				je.Wait = &c
			case ir.OpcSendEnable, ir.OpcRecvEnable:
				je.Enable = &jsonEnable{Queue: rp.Queues[e.Queue].Name, UpTo: e.UpTo}
			case ir.OpcHost:
				if g.Ops[e.Op].Kind == ir.OpReduce {
					je.Reduce = e.Red.String()
				}
				je.Local, je.Source = slice(g.Ops[e.Op].Dst), slice(g.Ops[e.Op].Src)
				for _, c := range e.Waits {
					je.Waits = append(je.Waits, cond(c))
				}
			}
			jq.WQEs = append(jq.WQEs, je)
		}
		jr.Queues = append(jr.Queues, jq)
	}
	for ci := range rp.CQs {
		cq := &rp.CQs[ci]
		jr.CQs = append(jr.CQs, jsonCQ{Name: cq.Name, Queue: rp.Queues[cq.Queue].Name, Depth: cq.Depth, PerIteration: cq.PerIteration})
	}
	if rp.Trig != nil {
		jr.Trigger = trigJSON(p, rp)
	}
	return jr
}

// writeTriggered lists a rank's counters and its triggered work in submission order, each entry
// with the condition that fires it, what it does, its op and file:line.
func writeTriggered(b *bytes.Buffer, p *ir.Plan, rp *ir.RankPlan) {
	tr := rp.Trig
	b.WriteString("  counters\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for i := range tr.Counters {
		c := &tr.Counters[i]
		fmt.Fprintf(tw, "    #%d\t%s\t%s\t+%d per iteration\n", i, c.Name, c.Kind, c.PerIteration)
	}
	tw.Flush()
	b.WriteString("  triggered work (submission order)\n")
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for k := range tr.Work {
		w := &tr.Work[k]
		when := "at once"
		if w.Counter != ir.Untriggered {
			when = fmt.Sprintf("when %s >= %d", tr.Counters[w.Counter].Name, w.Threshold)
			if w.Cause != ir.None {
				when += fmt.Sprintf(" (%s done)", p.Graph.Ops[w.Cause].Name)
			}
		}
		var what string
		switch w.Kind {
		case ir.TrigOp:
			e := &rp.Queues[w.Loc.Queue].Chain[w.Loc.Index]
			what = fmt.Sprintf("%s %s[%d]", e.Opcode, rp.Queues[w.Loc.Queue].Name, w.Loc.Index)
		case ir.TrigAdd:
			what = fmt.Sprintf("counter-add %s += %d", tr.Counters[w.Target].Name, w.Value)
		case ir.TrigSet:
			what = fmt.Sprintf("counter-set %s = %d", tr.Counters[w.Target].Name, w.Value)
		}
		pos := "-"
		if w.Pos.IsValid() {
			pos = fmt.Sprintf("%s:%d", w.Pos.Filename(), w.Pos.Line)
		}
		fmt.Fprintf(tw, "    [%d]\t%s\t%s\t%s\t%s\n", k, when, what, w.Name, pos)
	}
	tw.Flush()
	fmt.Fprintf(b, "  triggered: %s\n", triggerSummary(p, rp))
}

// triggerSummary says in words what a rank's triggered work costs against its target's profile:
// counters, entries and units outstanding per iteration, and when a counter runs out.
func triggerSummary(p *ir.Plan, rp *ir.RankPlan) string {
	prof := p.Target.Trigger
	l := prof.Load(rp)
	s := fmt.Sprintf("%s, %s outstanding per iteration", english.Plural(l.Counters, "counter"), english.Plural(l.Entries, "triggered entry"))
	limit := "no limit known"
	if prof.MaxOutstanding > 0 {
		limit = fmt.Sprintf("limit %d", prof.MaxOutstanding)
	}
	s += fmt.Sprintf(" (%s, counter work costing %d; %s)", english.Plural(l.Units, "unit"), prof.WorkCost(), limit)
	return s + ", " + overflowText(p.RankCounterLimit(rp.Rank), false)
}

// overflowText says after how many iterations the counter of lim overflows.
func overflowText(lim ir.CounterLimit, rank bool) string {
	if lim.Iterations == ir.NoIterationLimit {
		return "counters never overflow"
	}
	where := lim.Name
	if rank {
		where += fmt.Sprintf(" on rank %d", lim.Rank)
	}
	return fmt.Sprintf("counters overflow after %d iterations (%s, +%d per iteration, limit %d)", lim.Iterations, where, lim.PerIteration, lim.Max)
}
