// Package ir holds the intermediate representations the planner passes hand on: the Graph
// (every rank's buffers, queues, ops and dependency edges, with source positions), which
// elaboration builds and verification and lowering read; the Plan (per-rank work queues, CQs and
// WQE chains for one Target), which lowering builds and the engines, the listing and the viz
// read; and the built-in Targets. It is plain data with queries over it: it knows nothing of the
// syntax, and nothing of how a Graph is checked or lowered.
package ir

import (
	"fmt"
	"maps"
	"slices"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/decimal"
)

// OpID indexes Graph.Ops. Ops of one rank are contiguous and in declaration order.
type OpID int32

// QueueID indexes Graph.Queues. Queues of one rank are contiguous and in declaration order.
type QueueID int32

// BufID indexes Graph.Buffers (buffers are symmetric: the same on every rank).
type BufID int32

// None is the null value of OpID, QueueID and BufID.
const None = -1

// ElemType is a buffer element type.
type ElemType uint8

// Element types of the language.
const (
	U8 ElemType = iota
	I32
	U32
	I64
	U64
	F32
	F64
)

var elemNames = [...]string{"u8", "i32", "u32", "i64", "u64", "f32", "f64"}
var elemSizes = [...]int64{1, 4, 4, 8, 8, 4, 8}

func (t ElemType) String() string { return elemNames[t] }

// Size is the size of one element in bytes.
func (t ElemType) Size() int64 { return elemSizes[t] }

// IsFloat reports whether t is f32 or f64.
func (t ElemType) IsFloat() bool { return t == F32 || t == F64 }

// IsSigned reports whether t is a signed integer type.
func (t ElemType) IsSigned() bool { return t == I32 || t == I64 }

// ParseElemType maps a type keyword to its ElemType.
func ParseElemType(s string) (ElemType, bool) {
	for i, n := range elemNames {
		if n == s {
			return ElemType(i), true
		}
	}
	return 0, false
}

// Access is a set of remote access flags on a buffer.
type Access uint8

// Remote access flags (local write is always allowed).
const (
	RemoteRead Access = 1 << iota
	RemoteWrite
	RemoteAtomic
)

func (a Access) String() string {
	s := ""
	for _, f := range []struct {
		bit  Access
		name string
	}{{RemoteRead, "remote_read"}, {RemoteWrite, "remote_write"}, {RemoteAtomic, "remote_atomic"}} {
		if a&f.bit != 0 {
			if s != "" {
				s += " "
			}
			s += f.name
		}
	}
	return s
}

// InitFunc fills dst (the whole buffer's bytes, little-endian elements) with the buffer's initial
// contents on rank. It is evaluated at run time, not during elaboration: an init expression may
// be costly over large buffers.
type InitFunc func(rank int, dst []byte) error

// Buffer is a symmetric buffer: every rank has one with the same type, count and flags.
type Buffer struct {
	Name   string
	Type   ElemType
	Count  int64 // elements
	Access Access
	Init   InitFunc // nil: zero-filled
	// Extern: the caller supplies the memory (a library user binds it before the first start);
	// Init then only fills it for coredag's own runs and self-tests.
	Extern bool
	Pos    diag.Pos
}

// Bytes is the buffer's size in bytes.
func (b *Buffer) Bytes() int64 { return b.Count * b.Type.Size() }

// MessageBytes is what a plan's message size means: the bytes, on one rank, of the buffer its
// first expect names (the collective's buffer); without an expect, of its largest extern buffer.
// Plan sets pick plans by it, and predict and tune scale plans along it.
func (g *Graph) MessageBytes() (int64, error) {
	if len(g.Expects) > 0 {
		return g.Buffers[g.Expects[0].Dst].Bytes(), nil
	}
	var n int64
	for i := range g.Buffers {
		if g.Buffers[i].Extern {
			n = max(n, g.Buffers[i].Bytes())
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("the plan has no expect and no extern buffer to tell its message size")
	}
	return n, nil
}

// Slice is a range of elements [Off, Off+Len) of a buffer. Buf == None means no slice
// (a zero-length send, a recv for notify writes, an atomic without `to`).
//
// A Graph holds two per op, so a Slice has no position of its own: where an op's slices are
// written is the same on every rank, and Graph.PartPos tells it.
type Slice struct {
	Buf BufID
	Off int64 // first element
	Len int64 // elements
}

// NoSlice is the absent slice.
var NoSlice = Slice{Buf: None}

// Valid reports whether s names a buffer range.
func (s Slice) Valid() bool { return s.Buf != None }

// Overlaps reports whether s and t share a buffer and their ranges intersect: both
// start before the other ends (so an empty slice strictly inside the other counts).
func (s Slice) Overlaps(t Slice) bool {
	return s.Buf == t.Buf && s.Off < t.Off+t.Len && t.Off < s.Off+s.Len
}

// Within reports whether s lies wholly inside region reg (an empty s at either edge of reg
// included).
func (s Slice) Within(reg Slice) bool {
	return s.Buf == reg.Buf && s.Off >= reg.Off && s.Off+s.Len <= reg.Off+reg.Len
}

// Queue is one end of an RC connection, on one rank. It has a send side (send, write, read,
// atomic) and a receive side (recv); each side is FIFO.
type Queue struct {
	Name     string // with indices, e.g. "hop[2]"
	Rank     int
	PeerRank int
	Peer     QueueID // the peer rank's queue paired with this one (None until paired)
	Depth    int
	SendOps  []OpID // send-side ops in declaration order
	RecvOps  []OpID // recv ops in declaration order
	Pos      diag.Pos
}

// Loopback reports whether the queue connects a rank to itself.
func (q *Queue) Loopback() bool { return q.PeerRank == q.Rank }

// OpKind is what an op does.
type OpKind uint8

// Op kinds of the language.
const (
	OpSend OpKind = iota
	OpRecv
	OpWrite
	OpRead
	OpAtomicAdd
	OpAtomicCAS
	OpReduce
	OpCopy
	OpNop
	OpWait // a host op that completes once writes have landed in a region, or a word reached a value
)

var opKindNames = [...]string{"send", "recv", "write", "read", "atomic add", "atomic cas", "reduce", "copy", "nop", "wait"}

func (k OpKind) String() string { return opKindNames[k] }

// OnQueue reports whether ops of this kind are posted to a queue (otherwise they run on the host).
func (k OpKind) OnQueue() bool { return k <= OpAtomicCAS }

// IsRecvSide reports whether ops of this kind sit on a queue's receive side.
func (k OpKind) IsRecvSide() bool { return k == OpRecv }

// IsAtomic reports whether the op is a remote atomic.
func (k OpKind) IsAtomic() bool { return k == OpAtomicAdd || k == OpAtomicCAS }

// ReduceOp is the operator of a reduce.
type ReduceOp uint8

// Reduction operators.
const (
	RedSum ReduceOp = iota
	RedProd
	RedMin
	RedMax
	RedBand
	RedBor
	RedBxor
)

var reduceNames = [...]string{"sum", "prod", "min", "max", "band", "bor", "bxor"}

func (r ReduceOp) String() string { return reduceNames[r] }

// ParseReduceOp maps a reduction keyword to its ReduceOp.
func ParseReduceOp(s string) (ReduceOp, bool) {
	for i, n := range reduceNames {
		if n == s {
			return ReduceOp(i), true
		}
	}
	return 0, false
}

// Op is one operation on one rank. Which slices are local and which are on the peer depends on
// the kind:
//
//	kind        Src                 Dst                   Fetch
//	send        local (optional)    -                     -
//	recv        -                   local (optional)      -
//	write       local               peer                  -
//	read        peer                local                 -
//	atomic      -                   peer element (r+w)    local (optional)
//	reduce      local               local (read+write)    -
//	copy        local               local                 -
//	nop         -                   -                     -
//	wait        -                   local region or word  -
//
// A wait reads no data: its Dst is the region whose landed writes it counts, or the word whose
// value it watches (OpExtra.Word), and A() its threshold.
//
// The local data side of a send or write (Src) and of a recv or read (Dst) may be a
// scatter/gather list: that slice is the list's first segment and More holds the others, in
// order; the message is their bytes concatenated. Locals and Segs iterate every segment.
//
// A Graph holds an Op per op of every rank, so an Op is small (ir/size_test.go pins its size):
// its name and position are in a Site that every rank's op of that name shares, what only
// atomics and lists have (Fetch, A, B, More) is in an OpExtra that the other ops do without, and
// the fields are ordered to leave no padding.
type Op struct {
	*Site           // Name and Pos; never nil
	X      *OpExtra // atomics' and lists' parts (nil: none); read them with Fetch, A, B and More
	Src    Slice
	Dst    Slice
	Rank   int32
	Index  int32   // position on its queue side (k-th send-side or recv-side op), -1 for host ops
	Queue  QueueID // None for host ops
	Match  OpID    // send/notify write <-> its matching recv on the peer (None if unmatched)
	Kind   OpKind
	Red    ReduceOp // reduce only
	Inline bool     // send ... inline
	Notify bool     // write ... notify (write with immediate: consumes a recv at the peer)
}

// Site is an op's name and where it is declared. In an SPMD plan every rank declares the same
// names at the same places, so a Graph keeps a Site per name and statement, not per op: Sites
// are shared, never changed once made.
type Site struct {
	Name string   // with indices, e.g. "tx[2]"
	Pos  diag.Pos // the op statement
}

// OpExtra holds the parts of an Op that only some kinds have.
type OpExtra struct {
	Fetch Slice   // an atomic's local destination of the old value (NoSlice: none)
	A, B  int64   // atomic add: A is the addend; cas: A compare, B swap
	More  []Slice // a scatter/gather list's segments after the first (nil: one slice or none)
	// MorePos is where each of More's segments is written (a `{... for ...}` makes several at
	// one place); nil when the op was made without positions.
	MorePos []diag.Pos
	// Word: a wait watches the value of its Dst word (wait WORD >= VALUE) rather than counting the
	// writes that land in its Dst region (wait N writes to REGION).
	Word bool
}

// Part names one of an op's slices: Src, Dst, Fetch, or PartMore+k for More[k].
type Part uint8

// Parts of an op.
const (
	PartSrc Part = iota
	PartDst
	PartFetch
	PartMore
)

// Spot is where an op statement writes its Src, Dst and Fetch slices (the first segment's, for
// a list): the same for every rank's op of the statement. A zero Pos: not written, or unknown.
type Spot struct{ Src, Dst, Fetch diag.Pos }

// PartPos returns where part p of op id is written, or the op's position when that is unknown.
func (g *Graph) PartPos(id OpID, p Part) diag.Pos {
	op := &g.Ops[id]
	var pos diag.Pos
	switch sp := g.Spots[op.Pos]; {
	case p == PartSrc:
		pos = sp.Src
	case p == PartDst:
		pos = sp.Dst
	case p == PartFetch:
		pos = sp.Fetch
	case op.X != nil && int(p-PartMore) < len(op.X.MorePos):
		pos = op.X.MorePos[p-PartMore]
	}
	if !pos.IsValid() {
		return op.Pos
	}
	return pos
}

// Fetch is an atomic's local destination of the old value; NoSlice when it has none.
func (op *Op) Fetch() Slice {
	if op.X == nil {
		return NoSlice
	}
	return op.X.Fetch
}

// A is an atomic add's addend, a cas's compare value; 0 for other ops.
func (op *Op) A() int64 {
	if op.X == nil {
		return 0
	}
	return op.X.A
}

// B is a cas's swap value; 0 for other ops.
func (op *Op) B() int64 {
	if op.X == nil {
		return 0
	}
	return op.X.B
}

// More is a scatter/gather list's segments after the first; nil when the op has no list.
func (op *Op) More() []Slice {
	if op.X == nil {
		return nil
	}
	return op.X.More
}

// Extra returns op's OpExtra, giving it a new one if it has none.
func (op *Op) Extra() *OpExtra {
	if op.X == nil {
		op.X = &OpExtra{Fetch: NoSlice}
	}
	return op.X
}

// MaxListSegs is the most segments a scatter/gather list may have in the language (the first
// and 29 more). Targets may allow fewer (Target.MaxSGE); 30 is what ConnectX-class NICs report
// as max_send_sge.
const MaxListSegs = 30

// ListSide reports which side of op a scatter/gather list may stand on: Src for send and write,
// Dst for recv and read; ok is false for the other kinds.
func (op *Op) ListSide() (dst, ok bool) {
	switch op.Kind {
	case OpSend, OpWrite:
		return false, true
	case OpRecv, OpRead:
		return true, true
	}
	return false, false
}

// SrcSegs returns the segments of op's Src: Src followed by More when the list is on the Src
// side, else Src alone (none when Src is absent). The slice is fresh.
func (op *Op) SrcSegs() []Slice { return op.segs(op.Src, false) }

// DstSegs returns the segments of op's Dst, as SrcSegs does for Src.
func (op *Op) DstSegs() []Slice { return op.segs(op.Dst, true) }

// segs is small enough to inline, so that the result can stay on the caller's stack.
func (op *Op) segs(first Slice, dst bool) []Slice {
	if !first.Valid() {
		return nil
	}
	var more []Slice
	if d, ok := op.ListSide(); ok && d == dst && op.X != nil {
		more = op.X.More
	}
	return append([]Slice{first}, more...)
}

// WaitsWord reports whether op is a wait on the value of a memory word (not a count of writes).
func (op *Op) WaitsWord() bool { return op.Kind == OpWait && op.X != nil && op.X.Word }

// WordWaits gives, by buffer, the first wait of g that watches a word of it (wait WORD >=
// VALUE), None for a buffer without one: such a buffer starts at its init, from which check
// proved the wait. One pass over the ops serves every buffer.
func (g *Graph) WordWaits() []OpID {
	out := make([]OpID, len(g.Buffers))
	for b := range out {
		out[b] = None
	}
	for i := range g.Ops {
		if op := &g.Ops[i]; op.WaitsWord() && out[op.Dst.Buf] == None {
			out[op.Dst.Buf] = OpID(i)
		}
	}
	return out
}

// Edge is a dependency: To starts only after From has completed (same rank).
type Edge struct {
	From, To OpID
	Pos      diag.Pos // the `after` clause or dependency statement that made it
}

// Param is an evaluated plan parameter.
type Param struct {
	Name  string
	Value int64
	Pos   diag.Pos
}

// RankSpan is the range of ops and queues that belong to one rank.
type RankSpan struct {
	FirstOp, EndOp       OpID
	FirstQueue, EndQueue QueueID
}

// Graph is the elaborated plan: every rank's ops, queues and dependencies, with positions.
//
// A Graph is immutable once built. Whoever constructs one (the elaborator, a test, a tool) fills
// its fields and then calls Freeze, which builds the indexes behind Preds and Succs; from then on
// nothing changes it, no pass and no query, so any number of goroutines may read it at once. A
// pass that needs a variant builds a new Graph (WithEdges, or Clone and Freeze).
type Graph struct {
	Name    string
	File    string
	Ranks   int
	Params  []Param
	Buffers []Buffer
	Queues  []Queue
	Ops     []Op
	Edges   []Edge            // explicit `after` edges, in source order per rank
	Rank    []RankSpan        // indexed by rank
	Expects []Expect          // postconditions (`expect` statements), in source order
	Spots   map[diag.Pos]Spot // where each op statement writes its slices, by the op's Pos (PartPos)

	// Notes are remarks that are not errors, each at its position: what the checks left
	// unproven (an init too costly to evaluate in full).
	Notes diag.List

	// Relies is the ordering between the ops of a queue that the plan's race-freedom relies on
	// (order.go), set by the checks (planner.Load) once they have proven the races under a
	// target's ordering; nil when the plan relies on none, or was not checked. A runtime refuses a
	// transport that does not grant it.
	Relies *Reliance

	// Lands are the orders that the plan's wait ops make: each edge says that the landing of
	// From (a write, or an atomic add) happens before the end of To (a wait on another rank),
	// because every set of landings that lets To complete includes From's (docs/language.md,
	// Waiting for landings). Set by the checks (verify.Options.CheckDeadlocks) before anything
	// reads them; nil when the plan has no wait.
	Lands []Edge

	// adj is the CSR adjacency over Edges, built by Freeze; nil until then.
	adj *Deps
}

// Freeze ends the construction of g: it builds the adjacency behind Preds and Succs and returns
// g. Call it once, after the last change to g's fields; a Graph is not changed after it. Freeze
// panics when g is already frozen: a frozen Graph may be read concurrently, so it cannot change.
// It reads only the Edges and the number of Ops: the elaborator matches messages (Op.Match)
// while it runs.
func (g *Graph) Freeze() *Graph {
	if g.adj != nil {
		panic("ir: Freeze of a Graph that is already frozen")
	}
	g.adj = NewDeps(len(g.Ops), g.Edges)
	return g
}

// Frozen reports whether Freeze was called on g.
func (g *Graph) Frozen() bool { return g.adj != nil }

// Clone returns a copy of g that is not frozen and shares no slice with it (buffers' Init
// functions and ops' Sites are shared: they are read-only), for building a variant of g.
func (g *Graph) Clone() *Graph {
	out := *g
	out.adj = nil
	out.Params = slices.Clone(g.Params)
	out.Buffers = slices.Clone(g.Buffers)
	out.Queues = slices.Clone(g.Queues)
	for i := range out.Queues {
		out.Queues[i].SendOps = slices.Clone(out.Queues[i].SendOps)
		out.Queues[i].RecvOps = slices.Clone(out.Queues[i].RecvOps)
	}
	out.Ops = slices.Clone(g.Ops)
	for i := range out.Ops {
		if x := out.Ops[i].X; x != nil {
			c := *x
			c.More, c.MorePos = slices.Clone(x.More), slices.Clone(x.MorePos)
			out.Ops[i].X = &c
		}
	}
	out.Edges = slices.Clone(g.Edges)
	out.Rank = slices.Clone(g.Rank)
	out.Notes = slices.Clone(g.Notes)
	out.Expects = slices.Clone(g.Expects)
	out.Spots = maps.Clone(g.Spots)
	return &out
}

// WithEdges returns a frozen Graph that has edges as its Edges and shares everything else with
// g (read-only), but for Lands: the orders of waits depend on the edges, and the checks find
// them again. g is not changed.
func (g *Graph) WithEdges(edges []Edge) *Graph {
	out := *g
	out.adj = nil
	out.Edges = edges
	out.Lands = nil
	return out.Freeze()
}

// buildCSR lists, for each of n ops, the other end of the edges it is the key of: their To
// (byTo false: the successors) or their From (byTo: the predecessors), in the order of edges.
func buildCSR(n int, edges []Edge, byTo bool) (start, list []int32) {
	start = make([]int32, n+1)
	for _, e := range edges {
		k, _ := e.key(byTo)
		start[k+1]++
	}
	for i := 0; i < n; i++ {
		start[i+1] += start[i]
	}
	// Place each edge at its key's cursor, start[k], which ends where key k+1 begins; then move
	// the starts back one place (no second array of cursors).
	list = make([]int32, len(edges))
	for _, e := range edges {
		k, v := e.key(byTo)
		list[start[k]] = v
		start[k]++
	}
	copy(start[1:], start[:n])
	start[0] = 0
	return start, list
}

// key is e's key in buildCSR, and the op it lists under it.
func (e Edge) key(byTo bool) (k, v int32) {
	if byTo {
		return int32(e.To), int32(e.From)
	}
	return int32(e.From), int32(e.To)
}

// frozen returns g's adjacency, panicking when g was never frozen.
func (g *Graph) frozen() *Deps {
	if g.adj == nil {
		panic("ir: Graph read before Freeze (whoever builds a Graph calls Freeze when it is complete)")
	}
	return g.adj
}

// Preds returns the explicit predecessors of op (ops it is `after`). The slice is shared: do not modify it.
func (g *Graph) Preds(op OpID) []int32 { return g.frozen().Preds(op) }

// Succs returns the explicit successors of op. The slice is shared: do not modify it.
func (g *Graph) Succs(op OpID) []int32 { return g.frozen().Succs(op) }

// HasAtomics reports whether any op of the graph is a remote atomic.
func (g *Graph) HasAtomics() bool {
	for i := range g.Ops {
		if g.Ops[i].Kind.IsAtomic() {
			return true
		}
	}
	return false
}

// RankOps returns the ids of rank r's ops, in declaration order.
func (g *Graph) RankOps(r int) (first, end OpID) { return g.Rank[r].FirstOp, g.Rank[r].EndOp }

// Param returns the value of a parameter.
func (g *Graph) Param(name string) (int64, bool) {
	for _, p := range g.Params {
		if p.Name == name {
			return p.Value, true
		}
	}
	return 0, false
}

// OpString names an op for messages: "tx[2] on rank 1".
func (g *Graph) OpString(id OpID) string {
	op := &g.Ops[id]
	return fmt.Sprintf("%s on rank %d", op.Name, op.Rank)
}

// SliceString formats a slice as the language writes it: buf[lo:hi].
func (g *Graph) SliceString(s Slice) string {
	if s.Valid() && s.Off == 0 && s.Len == g.Buffers[s.Buf].Count && s.Len > 0 {
		return g.Buffers[s.Buf].Name // no copy
	}
	return string(g.AppendSlice(nil, s))
}

// AppendSlice appends SliceString(s) to dst.
func (g *Graph) AppendSlice(dst []byte, s Slice) []byte {
	if !s.Valid() {
		return append(dst, '-')
	}
	b := &g.Buffers[s.Buf]
	dst = append(dst, b.Name...)
	if s.Off == 0 && s.Len == b.Count && s.Len > 0 {
		return dst
	}
	dst = decimal.AppendInt(append(dst, '['), s.Off)
	if s.Len != 1 { // buf[lo:hi], and buf[lo:lo] for an empty slice, even of an empty buffer
		dst = decimal.AppendInt(append(dst, ':'), s.Off+s.Len)
	}
	return append(dst, ']')
}

// SegsString formats a scatter/gather list as the language writes it: "a[0:4], a[8:12]".
func (g *Graph) SegsString(segs []Slice) string {
	if len(segs) == 0 {
		return "-"
	}
	s := g.SliceString(segs[0])
	for _, x := range segs[1:] {
		s += ", " + g.SliceString(x)
	}
	return s
}

// SegsBytes is the total length of a scatter/gather list in bytes.
func (g *Graph) SegsBytes(segs []Slice) int64 {
	var n int64
	for _, s := range segs {
		n += g.Bytes(s)
	}
	return n
}

// Bytes is the slice's length in bytes.
func (g *Graph) Bytes(s Slice) int64 {
	if !s.Valid() {
		return 0
	}
	return s.Len * g.Buffers[s.Buf].Type.Size()
}

// Pieces pairs a gather list with a scatter list of the same total bytes: it calls yield with
// each run of src and the part of dst its bytes land in, in list order, so that the runs cover
// both lists (zero-length segments are skipped). Lengths are cut at element boundaries of both
// sides.
func (g *Graph) Pieces(src, dst []Slice, yield func(a, b Slice)) {
	i, j := 0, 0
	var ao, bo int64 // elements of src[i] and dst[j] already paired
	for i < len(src) && j < len(dst) {
		a, b := src[i], dst[j]
		asz, bsz := g.Buffers[a.Buf].Type.Size(), g.Buffers[b.Buf].Type.Size()
		n := min((a.Len-ao)*asz, (b.Len-bo)*bsz)
		if n > 0 {
			yield(Slice{Buf: a.Buf, Off: a.Off + ao, Len: n / asz}, Slice{Buf: b.Buf, Off: b.Off + bo, Len: n / bsz})
		}
		ao, bo = ao+n/asz, bo+n/bsz
		if ao >= a.Len {
			i, ao = i+1, 0
		}
		if bo >= b.Len {
			j, bo = j+1, 0
		}
	}
}
