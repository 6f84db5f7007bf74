// Package listing is an output: it writes a compiled ir.Plan as the WQE listing of
// `coredag compile` (per rank and work queue, each entry with its operands, flags and source
// line) or as JSON (docs/compile-json.md). It reads the Plan only; package viz beside it draws.
package listing

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/coredag/coredag/ir"
)

// Options selects what a listing shows.
type Options struct {
	Ranks []int // only these ranks; nil: all
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
	if workers <= 1 || lw.opt.Ranks != nil {
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
	case lw.opt.Ranks != nil && !slices.Contains(lw.opt.Ranks, r):
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
	if lim := p.Graph.WordLimit(); lim.Iterations != ir.NoIterationLimit {
		fmt.Fprintf(lw.b, "words: %s\n", wordLimitText(p.Graph, lim))
	}
	return lw.b.Flush() // the first write error, if any
}
