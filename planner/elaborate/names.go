package elaborate

import (
	"strconv"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
)

// Op and queue names. An SPMD text names its ops alike on every rank and pass ("tx[s]"), so an
// elaborator compiles the text once (code): beside each statement, the nameInfo of every name
// it writes (the names its index made and the Sites of its ops) and its expressions (cexpr.go).
// Per base name ("tx") it keeps the ops and queues of the current rank by index, in slots
// stamped with the rank's generation, and those of two indices ("pk[s, b]") in a row per first
// index. Declaring an op and resolving a reference to it then index arrays instead of hashing
// "tx[3]", and the text "tx[3]" is made only when something needs it. Names with more indices,
// a negative or a large index, or past the tables' bounds, are kept by their text (opIdx,
// queueIdx).

// maxByIndex bounds the indices kept per name in the text and per base name.
const maxByIndex = 1 << 16

// maxByIndexLen bounds the entries kept over all of them (of either kind); Options lowers it
// for tests.
const maxByIndexLen = 1 << 18

// byIndexLen is maxByIndexLen, or lower (Options).
func (el *elaborator) byIndexLen() int {
	if el.opt.byIndexSet {
		return min(el.opt.maxByIndexLen, maxByIndexLen)
	}
	return maxByIndexLen
}

// nameTables is what an elaborator keeps of names; each worker of a parallel elaboration has
// its own.
type nameTables struct {
	code        *code               // the file's statements, with the nameInfo of each name
	ops, queues map[string]*idTable // by base name
	made, slots int                 // entries in the infos' made and in the tables, for the bounds
	gen         uint32              // the current rank's stamp: slots of another one are stale
}

func newNameTables(f *dsl.File) nameTables {
	t := nameTables{ops: map[string]*idTable{}, queues: map[string]*idTable{}}
	t.code = t.compile(f.Stmts)
	return t
}

// code is a list of statements and, beside each, what was compiled of it: elaborating a
// statement finds its names and expressions without a lookup.
type code struct {
	stmts []dsl.Stmt
	at    []stmtCode
}

type stmtCode struct {
	x, y, z *cexpr      // a let's, var's or assignment's value; a loop's bounds and step; an if's condition
	slices  []cslice    // an op's slices, those in lists included
	name    *nameInfo   // an op's or a queue's name
	peer    *nameInfo   // a queue's peer; the queue an op is on
	after   []*nameInfo // an op's or dependency's after
	ops     []*nameInfo // the ops of a dependency statement
	body    *code       // a loop's body, an if's then
	els     *code       // an if's else
}

// cslice is a slice of an op statement with its bounds compiled.
type cslice struct {
	sl     *dsl.Slice
	lo, hi *cexpr
	buf    ir.BufID // its buffer, once found, or None
}

func compileSlice(sl *dsl.Slice) *cslice {
	return &cslice{sl: sl, lo: compileExpr(sl.Lo), hi: compileExpr(sl.Hi), buf: ir.None}
}

// compile makes the code of stmts.
func (t *nameTables) compile(stmts []dsl.Stmt) *code {
	c := &code{stmts: stmts, at: make([]stmtCode, len(stmts))}
	infos := func(names []*dsl.Name) []*nameInfo {
		out := make([]*nameInfo, len(names))
		for i, n := range names {
			out[i] = newNameInfo(n, t.ops)
		}
		return out
	}
	for i, st := range stmts {
		at := &c.at[i]
		switch st := st.(type) {
		case *dsl.LetStmt:
			at.x = compileExpr(st.Value)
		case *dsl.VarStmt:
			at.x = compileExpr(st.Value)
		case *dsl.AssignStmt:
			at.x = compileExpr(assignValue(st))
		case *dsl.QueueStmt:
			at.name, at.peer = newNameInfo(st.Name, t.queues), newNameInfo(st.Peer, nil)
		case *dsl.OpStmt:
			at.name, at.peer, at.after = newNameInfo(st.Name, t.ops), newNameInfo(queueOf(st.Op), t.queues), infos(st.After)
			at.slices = compileSlices(st.Op)
		case *dsl.DepStmt:
			at.ops, at.after = infos(st.Ops), infos(st.After)
		case *dsl.ForStmt:
			at.x, at.y, at.z = compileExpr(st.From), compileExpr(st.To), compileExpr(st.Step)
			at.body = t.compile(st.Body)
		case *dsl.IfStmt:
			at.x = compileExpr(st.Cond)
			at.body, at.els = t.compile(st.Then), t.compile(st.Else)
		}
	}
	return c
}

// newNameInfo makes the nameInfo of n, an op's or a queue's name as tabs says (nil: neither,
// n is kept by its text).
func newNameInfo(n *dsl.Name, tabs map[string]*idTable) *nameInfo {
	if n == nil {
		return &nameInfo{}
	}
	info := &nameInfo{n: n, index: compileExprs(n.Index)}
	if tabs != nil {
		if info.tab = tabs[n.Ident.Name]; info.tab == nil {
			info.tab = &idTable{}
			tabs[n.Ident.Name] = info.tab
		}
	}
	return info
}

// queueOf is the queue an operation is on, or nil.
func queueOf(o dsl.Operation) *dsl.Name {
	switch o := o.(type) {
	case *dsl.SendOp:
		return o.Queue
	case *dsl.RecvOp:
		return o.Queue
	case *dsl.WriteOp:
		return o.Queue
	case *dsl.ReadOp:
		return o.Queue
	case *dsl.AtomicOp:
		return o.Queue
	}
	return nil
}

// compileSlices compiles the slices of an operation.
func compileSlices(o dsl.Operation) []cslice {
	var out []cslice
	var add func(sl *dsl.Slice)
	add = func(sl *dsl.Slice) {
		if sl == nil {
			return
		}
		if sl.For != nil {
			add(sl.For.Slice)
			return
		}
		out = append(out, *compileSlice(sl))
	}
	addAll := func(sls ...*dsl.Slice) {
		for _, sl := range sls {
			add(sl)
		}
	}
	switch o := o.(type) {
	case *dsl.SendOp:
		addAll(append([]*dsl.Slice{o.Slice}, o.More...)...)
	case *dsl.RecvOp:
		addAll(append([]*dsl.Slice{o.Slice}, o.More...)...)
	case *dsl.WriteOp:
		addAll(append([]*dsl.Slice{o.Src, o.Dst}, o.More...)...)
	case *dsl.ReadOp:
		addAll(append([]*dsl.Slice{o.Src, o.Dst}, o.More...)...)
	case *dsl.AtomicOp:
		addAll(o.Target, o.To)
	case *dsl.ReduceOp:
		addAll(append(append([]*dsl.Slice{o.Dst, o.Src}, o.DstMore...), o.SrcMore...)...)
	case *dsl.CopyOp:
		addAll(append(append([]*dsl.Slice{o.Src, o.Dst}, o.SrcMore...), o.DstMore...)...)
	case *dsl.WaitOp:
		addAll(o.Word, o.Region)
	}
	return out
}

// nameInfo is what is kept of one name written in the text (code).
type nameInfo struct {
	n     *dsl.Name
	index []*cexpr // its indices, compiled
	made  []made   // by index: the names it made (interned ones only) and their Sites
	made2 [][]made // the same by first and second index, for a name with two
	plain *ir.Site // the Site of the op it names when it has no index
	tab   *idTable // the table of its base name, among the ops or the queues
}

type made struct {
	name string
	site *ir.Site
}

// idTable holds the ops or queues of one base name on the current rank: slot 0 for the plain
// name, slot i+1 for name[i]; rows[i] holds name[i, j] in its slot j.
type idTable struct {
	slots []idSlot
	rows  []*idTable
}

type idSlot struct {
	gen uint32
	id  int32
}

// ref is an evaluated name: its text and where the tables keep it.
type ref struct {
	name string    // its text; "" until text makes it, for a name with one or two indices
	info *nameInfo // the name as written (info.n) and what is kept of it
	slot int32     // its slot in an idTable (of a row, when row > 0), or -1: kept by its text only
	row  int32     // for a name with two indices (i, j) kept in the tables: i+1 (slot is j); else 0
}

// name evaluates an indexed name (info.n) into its canonical text ("tx[3]", "hop[1,2]") and
// its ref.
func (el *elaborator) name(info *nameInfo, s *scope) (ref, bool) {
	n := info.n
	r := ref{info: info, slot: -1}
	if len(n.Index) == 0 {
		r.name, r.slot = n.Ident.Name, 0
		return r, true
	}
	var vals [2]int64 // the indices evaluated
	v, ok := el.evalc(info.index[0], s)
	if !ok {
		return r, false
	}
	vals[0] = v
	if v < 0 || v >= maxByIndex || len(n.Index) > 2 {
		return el.nameText(r, vals[:1], s)
	}
	if len(n.Index) == 1 {
		r.slot = int32(v) + 1 // its text is made when needed (text)
		return r, true
	}
	w, ok := el.evalc(info.index[1], s)
	if !ok {
		return r, false
	}
	vals[1] = w
	if w < 0 || w >= maxByIndex {
		return el.nameText(r, vals[:2], s)
	}
	r.row, r.slot = int32(v)+1, int32(w)
	return r, true
}

// indices are the indices of r, a name with one or two kept in the tables (slot >= 0).
func (r *ref) indices(vals *[2]int64) []int64 {
	if r.row > 0 {
		vals[0], vals[1] = int64(r.row)-1, int64(r.slot)
		return vals[:2]
	}
	vals[0] = int64(r.slot) - 1
	return vals[:1]
}

// made is what r's info keeps of r, a name with one or two indices, or nil.
func (r *ref) made() *made {
	switch {
	case r.row > 0:
		if i, j := int(r.row)-1, int(r.slot); i < len(r.info.made2) && j < len(r.info.made2[i]) {
			return &r.info.made2[i][j]
		}
	case r.slot > 0 && int(r.slot) <= len(r.info.made):
		return &r.info.made[r.slot-1]
	}
	return nil
}

// text returns the text of r, making it if name did not.
func (el *elaborator) text(r *ref) string {
	if r.name == "" {
		if m := r.made(); m != nil && m.name != "" {
			r.name = m.name
		} else {
			var vals [2]int64
			*r, _ = el.nameText(*r, r.indices(&vals), nil) // every index evaluated: nothing more to evaluate
		}
	}
	return r.name
}

// nameText makes the text of r, a name with indices whose first len(vals) are evaluated, and
// keeps it when it is interned and r.info keeps its indices.
func (el *elaborator) nameText(r ref, vals []int64, s *scope) (ref, bool) {
	n, info := r.info.n, r.info
	var arr [32]byte
	buf := append(arr[:0], n.Ident.Name...)
	buf = append(buf, '[')
	for i := range n.Index {
		var v int64
		if i < len(vals) {
			v = vals[i]
		} else {
			var ok bool
			if v, ok = el.evalc(info.index[i], s); !ok {
				return r, false
			}
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, v, 10)
	}
	buf = append(buf, ']')
	str, kept := el.mem.names.Intern(buf)
	r.name = str
	if !kept {
		return r, true
	}
	switch {
	case r.row > 0:
		if i, j := int(r.row)-1, int(r.slot); keepMade(el, &info.made2, i+1) && keepMade(el, &info.made2[i], j+1) {
			info.made2[i][j].name = str
		}
	case r.slot > 0:
		if v := int(r.slot) - 1; keepMade(el, &info.made, v+1) {
			info.made[v].name = str
		}
	}
	return r, true
}

// keepMade grows *s to n entries, if the bounds allow it (byIndexLen), and reports whether it
// holds them.
func keepMade[T any](el *elaborator, s *[]T, n int) bool {
	if more := n - len(*s); more > 0 {
		if el.names.made+more > el.byIndexLen() {
			return false
		}
		el.names.made += more
		*s = append(*s, make([]T, more)...)
	}
	return true
}

// siteKey is a name an op statement (its name, n) made.
type siteKey struct {
	n    *dsl.Name
	name string
}

// site returns the Site of the op that r, the name of an op statement, names: one per name and
// statement, which the ranks share, up to maxInterned of them past what r's info keeps (past
// that, one per op).
func (el *elaborator) site(r *ref) *ir.Site {
	if m := r.made(); m != nil && m.site != nil {
		return m.site
	}
	name := el.text(r)
	var at **ir.Site
	switch m := r.made(); {
	case r.slot == 0 && r.row == 0:
		at = &r.info.plain
	case m != nil && m.name == name:
		at = &m.site
	}
	if at != nil && *at != nil {
		return *at
	}
	k := siteKey{r.info.n, name}
	if at == nil {
		if s, _ := el.mem.sites.Get(k); s != nil {
			return s
		}
	}
	s := el.mem.siteChunk.New()
	*s = ir.Site{Name: name, Pos: r.info.n.Pos()}
	switch {
	case at != nil:
		*at = s
	default:
		el.mem.sites.Put(k, s)
	}
	return s
}

// claim declares r as id in its table, or in m when the table does not keep it. It returns the id r had
// already on this rank, and whether it had none.
func claim[ID ~int32](el *elaborator, m map[string]ID, r ref, id ID) (ID, bool) {
	if t, a := el.slotOf(&r, true); t != nil {
		s := &t.slots[a]
		if s.gen == el.names.gen {
			return ID(s.id), false
		}
		*s = idSlot{el.names.gen, int32(id)}
		return id, true
	}
	name := el.text(&r)
	if was, dup := m[name]; dup {
		return was, false
	}
	m[name] = id
	return id, true
}

// unclaim forgets a declaration of r made by claim.
func unclaim[ID ~int32](el *elaborator, m map[string]ID, r ref) {
	if t, a := el.slotOf(&r, false); t != nil {
		t.slots[a].gen = 0
		return
	}
	delete(m, el.text(&r))
}

// find returns what r names on this rank, declared by claim.
func find[ID ~int32](el *elaborator, m map[string]ID, r ref) (ID, bool) {
	if t, a := el.slotOf(&r, false); t != nil {
		s := t.slots[a]
		return ID(s.id), s.gen == el.names.gen
	}
	id, ok := m[el.text(&r)]
	return id, ok
}

// slotOf returns the table and the slot in it that keep r, or nil when r is kept by its text.
// With grow, it makes room for r if the bounds allow it; without, it finds only a slot made
// before.
func (el *elaborator) slotOf(r *ref, grow bool) (*idTable, int) {
	t, a := r.info.tab, int(r.slot)
	if a < 0 || t == nil {
		return nil, 0
	}
	if r.row > 0 {
		if t = el.row(t, int(r.row)-1, grow); t == nil {
			return nil, 0
		}
	}
	if grow && !el.grow(t, a) || !grow && a >= len(t.slots) {
		return nil, 0
	}
	return t, a
}

// row returns row i of t, made if grow is set and the bounds allow it, or nil. Like a table's
// slots, a row that could not be made never will.
func (el *elaborator) row(t *idTable, i int, grow bool) *idTable {
	if i < len(t.rows) && t.rows[i] != nil {
		return t.rows[i]
	}
	if !grow {
		return nil
	}
	if more := i + 1 - len(t.rows); more > 0 {
		if el.names.slots+more > el.byIndexLen() {
			return nil
		}
		el.names.slots += more
		t.rows = append(t.rows, make([]*idTable, more)...)
	}
	t.rows[i] = &idTable{}
	return t.rows[i]
}

// grow makes t hold slot a, if the bounds allow it. A table that could not grow to a slot
// never will (the slots only add up): a slot past a table's end then always means that the name
// is kept by its text.
func (el *elaborator) grow(t *idTable, a int) bool {
	if a < len(t.slots) {
		return true
	}
	more := a + 1 - len(t.slots)
	if el.names.slots+more > el.byIndexLen() {
		return false
	}
	el.names.slots += more
	t.slots = append(t.slots, make([]idSlot, more)...)
	return true
}
