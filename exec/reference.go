package exec

import (
	"github.com/coredag/coredag/internal/minheap"
	"github.com/coredag/coredag/ir"
)

// Reference runs g serially and returns the final memory of one iteration: every buffer reset to
// its init values, then every op executed once, atomically, in a topological order of the
// happens-before relation (after edges, FIFO order on each queue side, each send or notify
// write together with the recv it matches, which run as one step: the data lands when both are
// posted, and each wait after the landings it needs, Graph.Lands). For a race-free plan any such order gives the same memory, so this is the result
// every engine must reproduce.
//
// The reference checks what a NIC would check: matching, lengths, bounds and remote access
// flags. A violation is an *OpError naming the op; a dependency cycle is an error naming an op
// on it.
func Reference(g *ir.Graph) (*Memory, error) {
	order, err := SerialOrder(g)
	if err != nil {
		return nil, err
	}
	m := NewMemory(g)
	if err := m.ResetAll(); err != nil {
		return nil, err
	}
	for _, id := range order {
		if err := m.Apply(id); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SerialOrder returns the ops of g in a topological order of happens-before, with each matched
// recv left out (Apply on its send or notify write performs it). Among ready ops the lowest id
// goes first, so the order is deterministic.
func SerialOrder(g *ir.Graph) ([]ir.OpID, error) {
	n := len(g.Ops)
	// node[i] is the op that carries op i: a matched recv merges into its sender.
	node := make([]int32, n)
	for i := range g.Ops {
		node[i] = int32(i)
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		switch {
		case op.SendsMessage():
			if op.Match == ir.None {
				return nil, opErrorf(g, ir.OpID(i), "%s has no matching recv on rank %d: it would never complete", op.Kind, peerRank(g, op))
			}
			node[op.Match] = int32(i)
		case op.Kind == ir.OpRecv && op.Match == ir.None:
			return nil, opErrorf(g, ir.OpID(i), "recv has no matching send or notify write from rank %d: it would never complete", peerRank(g, op))
		}
	}
	type arc struct{ from, to int32 }
	var arcs []arc
	add := func(a, b ir.OpID) error {
		x, y := node[a], node[b]
		if x == y {
			return opErrorf(g, b, "must start after %s completes, but they are one transfer (the send completes only after its recv is posted): this deadlocks", g.OpString(a))
		}
		arcs = append(arcs, arc{x, y})
		return nil
	}
	for _, e := range g.Edges {
		if err := add(e.From, e.To); err != nil {
			return nil, err
		}
	}
	for _, e := range g.Lands { // a wait runs after the landings it needs
		if err := add(e.From, e.To); err != nil {
			return nil, err
		}
	}
	for qi := range g.Queues {
		q := &g.Queues[qi]
		for _, side := range [][]ir.OpID{q.SendOps, q.RecvOps} {
			for k := 1; k < len(side); k++ {
				if err := add(side[k-1], side[k]); err != nil {
					return nil, err
				}
			}
		}
	}
	indeg := make([]int32, n)
	start := make([]int32, n+1)
	for _, a := range arcs {
		indeg[a.to]++
		start[a.from+1]++
	}
	for i := 0; i < n; i++ {
		start[i+1] += start[i]
	}
	succ := make([]int32, len(arcs))
	fill := append([]int32(nil), start[:n]...)
	for _, a := range arcs {
		succ[fill[a.from]] = a.to
		fill[a.from]++
	}
	h := minheap.NewOrdered[int32]()
	for i := 0; i < n; i++ {
		if node[i] == int32(i) && indeg[i] == 0 {
			h.Push(int32(i))
		}
	}
	order := make([]ir.OpID, 0, n)
	for h.Len() > 0 {
		x := h.Pop()
		order = append(order, ir.OpID(x))
		for _, y := range succ[start[x]:start[x+1]] {
			if indeg[y]--; indeg[y] == 0 {
				h.Push(y)
			}
		}
	}
	nodes := 0
	for i := 0; i < n; i++ {
		if node[i] == int32(i) {
			nodes++
		}
	}
	if len(order) != nodes {
		for i := 0; i < n; i++ {
			if node[i] == int32(i) && indeg[i] > 0 {
				return nil, opErrorf(g, ir.OpID(i), "is on a dependency cycle (through after edges, queue order or send/recv matching): it can never start")
			}
		}
	}
	return order, nil
}

func peerRank(g *ir.Graph, op *ir.Op) int {
	if op.Queue == ir.None {
		return int(op.Rank)
	}
	return g.Queues[op.Queue].PeerRank
}

// Apply executes op id atomically on m with its exact semantics. A send or notify write also
// performs its matched recv. Errors are *OpError values naming the op.
func (m *Memory) Apply(id ir.OpID) error {
	g := m.g
	op := &g.Ops[id]
	local := func(s ir.Slice) ([]byte, error) {
		b, err := m.SliceBytes(int(op.Rank), s)
		if err != nil {
			return nil, opError(g, id, err)
		}
		return b, nil
	}
	remote := func(s ir.Slice, need ir.Access) ([]byte, error) {
		peer := peerRank(g, op)
		if !s.Valid() {
			return nil, opErrorf(g, id, "%s has no remote slice", op.Kind)
		}
		b, err := m.SliceBytes(peer, s)
		if err != nil {
			return nil, opErrorf(g, id, "remote access to rank %d: %v", peer, err)
		}
		if buf := &g.Buffers[s.Buf]; buf.Access&need == 0 {
			return nil, opErrorf(g, id, "remote access error: %s on rank %d is not %s (add the flag to buffer %s)", g.SliceString(s), peer, need, buf.Name)
		}
		return b, nil
	}
	// list checks the slices of a scatter/gather list on rank r and returns their total bytes.
	list := func(r int, segs []ir.Slice) (int, error) {
		n := 0
		for _, s := range segs {
			b, err := m.SliceBytes(r, s)
			if err != nil {
				return 0, opError(g, id, err)
			}
			n += len(b)
		}
		return n, nil
	}
	// move copies a gather list on rank sr into a scatter list of the same total bytes on rank
	// dr, in list order (list has checked both).
	move := func(sr int, src []ir.Slice, dr int, dst []ir.Slice) {
		g.Pieces(src, dst, func(a, b ir.Slice) {
			x, _ := m.SliceBytes(sr, a)
			y, _ := m.SliceBytes(dr, b)
			copy(y, x)
		})
	}
	switch op.Kind {
	case ir.OpSend, ir.OpWrite:
		src := op.SrcSegs()
		n, err := list(int(op.Rank), src)
		if err != nil {
			return err
		}
		if op.Kind == ir.OpWrite {
			dst, err := remote(op.Dst, ir.RemoteWrite)
			if err != nil {
				return err
			}
			if len(dst) != n {
				return opErrorf(g, id, "write of %d bytes into %s of %d bytes", n, g.SliceString(op.Dst), len(dst))
			}
			move(int(op.Rank), src, peerRank(g, op), []ir.Slice{op.Dst})
			if !op.Notify {
				return nil
			}
		}
		if op.Match == ir.None {
			return opErrorf(g, id, "%s has no matching recv on rank %d", op.Kind, peerRank(g, op))
		}
		rv := &g.Ops[op.Match]
		dst := rv.DstSegs()
		rn, err := list(int(rv.Rank), dst)
		if err != nil {
			return err
		}
		if op.Kind == ir.OpWrite {
			if rn != 0 {
				return opErrorf(g, op.Match, "recv matched with notify write %s must have no slice", g.OpString(id))
			}
			return nil
		}
		if rn != n {
			return opErrorf(g, id, "send of %d bytes matched with recv %s of %d bytes", n, g.OpString(op.Match), rn)
		}
		move(int(op.Rank), src, int(rv.Rank), dst)
	case ir.OpRecv:
		// Performed by its sender.
	case ir.OpRead:
		src, err := remote(op.Src, ir.RemoteRead)
		if err != nil {
			return err
		}
		dst := op.DstSegs()
		n, err := list(int(op.Rank), dst)
		if err != nil {
			return err
		}
		if n != len(src) {
			return opErrorf(g, id, "read of %d bytes into %s of %d bytes", len(src), g.SegsString(dst), n)
		}
		move(peerRank(g, op), []ir.Slice{op.Src}, int(op.Rank), dst)
	case ir.OpAtomicAdd, ir.OpAtomicCAS:
		tgt, err := remote(op.Dst, ir.RemoteAtomic)
		if err != nil {
			return err
		}
		if len(tgt) != 8 {
			return opErrorf(g, id, "atomic target %s is %d bytes, not 8", g.SliceString(op.Dst), len(tgt))
		}
		fetch, err := local(op.Fetch())
		if err != nil {
			return err
		}
		if op.Fetch().Valid() && len(fetch) != 8 {
			return opErrorf(g, id, "atomic fetch target %s is %d bytes, not 8", g.SliceString(op.Fetch()), len(fetch))
		}
		old := AtomicApply(op.Kind, tgt, op.A(), op.B())
		if fetch != nil {
			putU64(fetch, old)
		}
	case ir.OpReduce, ir.OpCopy, ir.OpNop, ir.OpWait:
		return m.RunHost(id)
	default:
		return opErrorf(g, id, "unknown op kind #%d", op.Kind)
	}
	return nil
}

// RunHost executes host op id (reduce, copy or nop) on the CPU against m.
func (m *Memory) RunHost(id ir.OpID) error {
	g := m.g
	op := &g.Ops[id]
	switch op.Kind {
	case ir.OpNop, ir.OpWait: // a wait moves no data: its order is in g.Lands
		return nil
	case ir.OpReduce, ir.OpCopy:
	default:
		return opErrorf(g, id, "%s is not a host op", op.Kind)
	}
	dst, err := m.SliceBytes(int(op.Rank), op.Dst)
	if err != nil {
		return opError(g, id, err)
	}
	src, err := m.SliceBytes(int(op.Rank), op.Src)
	if err != nil {
		return opError(g, id, err)
	}
	if op.Kind == ir.OpCopy {
		if len(dst) != len(src) {
			return opErrorf(g, id, "copy of %d bytes into %s of %d bytes", len(src), g.SliceString(op.Dst), len(dst))
		}
		copy(dst, src)
		return nil
	}
	if op.Src.Buf == ir.None || op.Dst.Buf == ir.None {
		return opErrorf(g, id, "reduce needs two slices")
	}
	t := g.Buffers[op.Dst.Buf].Type
	if g.Buffers[op.Src.Buf].Type != t {
		return opErrorf(g, id, "reduce of %s from %s: element types differ", t, g.Buffers[op.Src.Buf].Type)
	}
	if err := Reduce(t, op.Red, dst, src); err != nil {
		return opError(g, id, err)
	}
	return nil
}

func putU64(b []byte, v uint64) {
	_ = b[7]
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	b[4], b[5], b[6], b[7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
}
