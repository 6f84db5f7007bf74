package listing

import (
	"bytes"
	"fmt"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/decimal"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
)

// The text listing: a rank's block, its chains and their operands, and the counters and
// triggered work of a triggered rank.

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
		hosts := 0
		for k := range q.Chain {
			if q.Chain[k].Opcode == ir.OpcHost {
				hosts++
			}
		}
		if hosts > 0 { // HOST entries run on the CPU: they are listed, but the NIC gets no WQE
			dst = fmt.Appendf(dst, ", %s and %s per iteration\n", english.Plural(int(q.PerIteration), "WQE"), english.Plural(hosts, "HOST step"))
		} else {
			dst = fmt.Appendf(dst, ", %s per iteration\n", english.Plural(int(q.PerIteration), "WQE"))
		}
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

// appendCond appends condition c in words: "<cq> >= <count>  (<op> done)", or for a count of
// a management queue's completions "(<queue> done)".
func appendCond(dst []byte, p *ir.Plan, rp *ir.RankPlan, c ir.Cond) []byte {
	name := "?"
	if c.CQ >= 0 && int(c.CQ) < len(rp.CQs) {
		name = rp.CQs[c.CQ].Name
	}
	who := "?"
	if c.Op >= 0 && int(c.Op) < len(p.Graph.Ops) {
		who = p.Graph.Ops[c.Op].Name
	}
	if c.CQ >= 0 && int(c.CQ) < len(rp.CQs) {
		if q := rp.CQs[c.CQ].Queue; q >= 0 && q < len(rp.Queues) && rp.Queues[q].Kind == ir.MgmtQueue {
			who = rp.Queues[q].Name // the WAIT that opens a piece of a management chain awaits the piece before
		}
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
		case ir.OpWait:
			if op.WaitsWord() {
				dst = decimal.AppendInt(append(sl(append(dst, "wait "...), op.Dst), " >= "...), op.A())
			} else {
				dst = sl(append(decimal.AppendInt(append(dst, "wait "...), op.A()), " writes to "...), op.Dst)
			}
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

// writeTriggered lists a rank's counters and its triggered work in submission order, each entry
// with the condition that fires it, what it does, its op and file:line.
func writeTriggered(b *bytes.Buffer, p *ir.Plan, rp *ir.RankPlan) {
	tr := rp.Trig
	b.WriteString("  counters\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for i := range tr.Counters {
		c := &tr.Counters[i]
		bound := ""
		if c.Kind == ir.CntLand {
			bound = "\tremote writes into " + p.Graph.SliceString(c.Region)
		}
		fmt.Fprintf(tw, "    #%d\t%s\t%s\t+%d per iteration%s\n", i, c.Name, c.Kind, c.PerIteration, bound)
	}
	tw.Flush()
	b.WriteString("  triggered work (submission order)\n")
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for k := range tr.Work {
		w := &tr.Work[k]
		when := "at once"
		if w.Counter != ir.Untriggered {
			when = fmt.Sprintf("when %s >= %d", tr.Counters[w.Counter].Name, w.Threshold)
			switch {
			case w.Cause != ir.None && tr.Counters[w.Counter].Kind == ir.CntLand:
				when += fmt.Sprintf(" (%s holds)", p.Graph.Ops[w.Cause].Name)
			case w.Cause != ir.None:
				when += fmt.Sprintf(" (%s done)", p.Graph.Ops[w.Cause].Name)
			}
		}
		if w.Kind == ir.TrigOp && w.Loc.Queue == rp.Host {
			if k, n, ok := tr.HostWait(p.Graph, w.Op); ok {
				when += fmt.Sprintf(", then the CPU waits for %s >= %d", tr.Counters[k].Name, n)
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

// wordLimitText says after how many iterations with no reset between them (a library's starts)
// the watched word of lim wraps.
func wordLimitText(g *ir.Graph, lim ir.WordLimit) string {
	t := g.Buffers[lim.Word.Buf].Type
	return fmt.Sprintf("%s on rank %d, watched by wait %s, wraps after %d iterations with no reset between them (a library's starts; from %s, +%d per iteration, largest %s %s)",
		g.SliceString(lim.Word), lim.Rank, g.Ops[lim.Wait].Name, lim.Iterations, ir.WordString(t, lim.Start), lim.PerIteration, t, ir.WordString(t, ir.WordTop(t)))
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
