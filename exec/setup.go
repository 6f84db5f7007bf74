package exec

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/ir"
)

// Endpoint is what one rank tells its peers before queues connect: the connection end of each
// of its QPs (graph queues first, in the rank's declaration order, then any local-only queues)
// and the remote descriptor of each buffer. It is plain data, safe to send between processes.
type Endpoint struct {
	Rank int            `json:"rank"`
	QPs  []nic.QPInfo   `json:"qps"`
	MRs  []nic.RemoteMR `json:"mrs"`
}

// qpSpec is one QP to create on a rank: a graph queue (both of its sides) or a local-only queue
// (the management or host-signal queue of the offload engine, connected to itself).
type qpSpec struct {
	name       string
	graphQueue ir.QueueID // None for local-only queues
	sendCQ     int        // index into rankLayout.cqs
	recvCQ     int        // index into rankLayout.cqs; -1: none (local-only queues)
	sendDepth  int
	recvDepth  int
	sendWQ     int // plan work queue of the send side, -1 for none
	recvWQ     int // plan work queue of the receive side, -1 for none
	managedS   bool
	managedR   bool
	crossChan  bool
}

type cqSpec struct {
	name  string
	depth int
}

// rankLayout is the set of CQs and QPs one rank creates.
type rankLayout struct {
	cqs       []cqSpec
	qps       []qpSpec
	maxInline int // inline capacity of its QPs: no more than the plan can use
	maxSGE    int // the longest scatter/gather list its QPs carry
}

// rankRes is one rank's open device and everything created on it.
type rankRes struct {
	rank   int
	layout rankLayout
	dev    nic.Context
	pd     nic.PD
	mrs    []nic.MR // by buffer
	cqs    []nic.CQ // by layout.cqs
	qps    []nic.QP // by layout.qps
	peers  []Endpoint
	// On a device that counts remote writes per registration (nic.RegistrationCounting): the
	// regions that waits of this rank count, each registered on its own (parts[j] is
	// registered as partMRs[j], handed to peers after the buffers' MRs), and the parts of each
	// peer, which writes into them name (by rank, found when first needed).
	perReg    bool
	parts     []ir.Slice
	partMRs   []nic.MR
	peerParts map[int][]ir.Slice
}

// pollLayout gives every graph queue of the rank one QP with a CQ per side: the send and
// receive work queues the plan compiled for a target without cross-channel, each as deep as its
// graph queue (within the device's limits).
func pollLayout(plan *ir.Plan, rank int, caps nic.Caps) (rankLayout, error) {
	g, rp := plan.Graph, &plan.Ranks[rank]
	l := rankLayout{maxInline: caps.MaxInline}
	span := g.Rank[rank]
	nq := int(span.EndQueue - span.FirstQueue)
	if len(rp.SendWQ) != nq || len(rp.RecvWQ) != nq {
		return l, fmt.Errorf("rank %d: the plan maps %d graph queues, the graph has %d", rank, len(rp.SendWQ), nq)
	}
	for i := 0; i < nq; i++ {
		q := span.FirstQueue + ir.QueueID(i)
		s, r := rp.SendWQ[i], rp.RecvWQ[i]
		if s < 0 || r < 0 || s >= len(rp.Queues) || r >= len(rp.Queues) || rp.Queues[s].CQ < 0 || rp.Queues[r].CQ < 0 {
			return l, fmt.Errorf("rank %d queue %s: the plan gives it no send and receive work queue with a CQ", rank, g.Queues[q].Name)
		}
		d := clampDepth(rp.Queues[s].Depth, caps.MaxQPDepth)
		l.cqs = append(l.cqs, cqSpec{name: rp.CQs[rp.Queues[s].CQ].Name, depth: clampDepth(d, caps.MaxCQDepth)},
			cqSpec{name: rp.CQs[rp.Queues[r].CQ].Name, depth: clampDepth(d, caps.MaxCQDepth)})
		l.qps = append(l.qps, qpSpec{name: g.Queues[q].Name, graphQueue: q, sendCQ: len(l.cqs) - 2, recvCQ: len(l.cqs) - 1,
			sendDepth: d, recvDepth: d, sendWQ: s, recvWQ: r})
	}
	return l, nil
}

func clampDepth(d, max int) int {
	if d <= 0 {
		d = 1
	}
	if max > 0 && d > max {
		d = max
	}
	return d
}

// offloadLayout creates what the compiled RankPlan names: one QP per graph queue carrying its
// send and receive work queues, plus self-connected QPs for the management and host-signal
// queues; one CQ per plan CQ.
func offloadLayout(g *ir.Graph, rp *ir.RankPlan) (rankLayout, error) {
	var l rankLayout
	longest, wq := 0, ""
	for wi := range rp.Queues {
		if n := len(rp.Queues[wi].Chain); n > longest {
			longest, wq = n, rp.Queues[wi].Name
		}
	}
	if err := offIDRoom(rp.Rank, len(rp.Queues), longest, wq); err != nil { // before any queue is made
		return l, err
	}
	for _, c := range rp.CQs {
		l.cqs = append(l.cqs, cqSpec{name: c.Name, depth: max(c.Depth, 1)})
	}
	span := g.Rank[rp.Rank]
	nq := int(span.EndQueue - span.FirstQueue)
	if len(rp.SendWQ) != nq || len(rp.RecvWQ) != nq {
		return l, fmt.Errorf("rank %d: the plan maps %d graph queues, the graph has %d", rp.Rank, len(rp.SendWQ), nq)
	}
	cqOf := func(wq int) int {
		if wq < 0 || wq >= len(rp.Queues) {
			return -1
		}
		return rp.Queues[wq].CQ
	}
	for i := 0; i < nq; i++ {
		s, r := rp.SendWQ[i], rp.RecvWQ[i]
		spec := qpSpec{name: g.Queues[span.FirstQueue+ir.QueueID(i)].Name, graphQueue: span.FirstQueue + ir.QueueID(i),
			sendWQ: s, recvWQ: r, sendCQ: cqOf(s), recvCQ: cqOf(r), sendDepth: 1, recvDepth: 1}
		if s >= 0 {
			wq := &rp.Queues[s]
			spec.sendDepth, spec.managedS = max(wq.Depth, 1), wq.Managed
			spec.crossChan = chainHasCrossChannel(wq.Chain)
		}
		if r >= 0 {
			wq := &rp.Queues[r]
			spec.recvDepth, spec.managedR = max(wq.Depth, 1), wq.Managed
		}
		if spec.sendCQ < 0 || spec.recvCQ < 0 {
			return l, fmt.Errorf("rank %d queue %s: the plan gives its work queues no CQ", rp.Rank, spec.name)
		}
		l.qps = append(l.qps, spec)
	}
	// The management queues (one, or more when one cannot hold the chain: the first is rp.Mgmt)
	// and the host-signal queue, each a QP of its own with only a send side.
	for wqi := range rp.Queues {
		wq := &rp.Queues[wqi]
		if wq.Kind != ir.MgmtQueue && wqi != rp.Host {
			continue
		}
		if wq.CQ < 0 {
			continue // a host queue without CQ posts nothing
		}
		l.qps = append(l.qps, qpSpec{name: wq.Name, graphQueue: ir.None, sendWQ: wqi, recvWQ: -1,
			sendCQ: wq.CQ, recvCQ: wq.CQ, sendDepth: max(wq.Depth, 1), recvDepth: 1,
			managedS: wq.Managed, crossChan: chainHasCrossChannel(wq.Chain)})
	}
	return l, nil
}

func chainHasCrossChannel(chain []ir.WQE) bool {
	for i := range chain {
		switch chain[i].Opcode {
		case ir.OpcWait, ir.OpcSendEnable, ir.OpcRecvEnable:
			return true
		}
	}
	return false
}

// accessOf is the MR access a buffer needs: local write always (receives, reads and fetches
// land in it), plus the remote rights the plan declared.
func accessOf(b *ir.Buffer) nic.Access {
	a := nic.AccessLocalWrite
	if b.Access&ir.RemoteWrite != 0 {
		a |= nic.AccessRemoteWrite
	}
	if b.Access&ir.RemoteRead != 0 {
		a |= nic.AccessRemoteRead
	}
	if b.Access&ir.RemoteAtomic != 0 {
		a |= nic.AccessRemoteAtomic
	}
	return a
}

// openRank opens rank's device and creates its PD, one MR per buffer, its CQs and QPs. The MR
// of an extern buffer that bound gives is the caller's memory (nic.PD.RegisterMR); every other
// buffer's memory is allocated by the provider.
func openRank(p nic.Provider, g *ir.Graph, rank int, l rankLayout, bound Bound) (*rankRes, error) {
	dev, err := p.Open(rank)
	if err != nil {
		return nil, fmt.Errorf("rank %d: open device: %w", rank, err)
	}
	res := &rankRes{rank: rank, layout: l, dev: dev}
	fail := func(err error) (*rankRes, error) {
		return nil, tornDown(err, res.close())
	}
	defer closeOnPanic(func() { _ = res.close() }) // the caller's Bound, say
	if res.pd, err = dev.AllocPD(); err != nil {
		return fail(fmt.Errorf("rank %d: allocate protection domain: %w", rank, err))
	}
	for i := range g.Buffers {
		b := &g.Buffers[i]
		var mr nic.MR
		if m, ok := bound.region(rank, ir.BufID(i)); ok && b.Extern {
			if err = fits(b, m); err != nil {
				return fail(fmt.Errorf("rank %d: %w", rank, err))
			}
			mr, err = res.pd.RegisterMR(m.Addr, m.Len, accessOf(b))
		} else {
			mr, err = res.pd.AllocMR(int(b.Bytes()), accessOf(b))
		}
		if err != nil {
			return fail(fmt.Errorf("%s: rank %d: register buffer %s (%d bytes, %s): %w", b.Pos, rank, b.Name, b.Bytes(), accessOf(b), err))
		}
		res.mrs = append(res.mrs, mr)
	}
	if rc, ok := dev.(nic.RegistrationCounting); ok && rc.CountsPerRegistration() {
		res.perReg = true
		if res.parts, err = countedParts(g, rank); err != nil {
			return fail(err)
		}
		for _, s := range res.parts {
			b := &g.Buffers[s.Buf]
			sz := b.Type.Size()
			mem := res.mrs[s.Buf].Bytes()[s.Off*sz : (s.Off+s.Len)*sz]
			if len(mem) == 0 {
				return fail(fmt.Errorf("%s: rank %d: a wait counts the writes that land in %s, which is empty", b.Pos, rank, g.SliceString(s)))
			}
			mr, err := res.pd.RegisterMR(unsafe.Pointer(&mem[0]), len(mem), accessOf(b))
			if err != nil {
				return fail(fmt.Errorf("%s: rank %d: register %s on its own, to count the writes that land in it: %w", b.Pos, rank, g.SliceString(s), err))
			}
			res.partMRs = append(res.partMRs, mr)
		}
	}
	for _, c := range l.cqs {
		cq, err := dev.CreateCQ(c.depth)
		if err != nil {
			return fail(fmt.Errorf("rank %d: create CQ %s (depth %d): %w", rank, c.name, c.depth, err))
		}
		res.cqs = append(res.cqs, cq)
	}
	for _, s := range l.qps {
		cfg := nic.QPConfig{SendCQ: res.cqs[s.sendCQ], RecvCQ: res.cqs[s.sendCQ], SendDepth: s.sendDepth, RecvDepth: s.recvDepth,
			MaxInline: l.maxInline, MaxSGE: l.maxSGE, CrossChannel: s.crossChan, ManagedSend: s.managedS, ManagedRecv: s.managedR}
		if s.recvCQ >= 0 {
			cfg.RecvCQ = res.cqs[s.recvCQ]
		}
		qp, err := res.pd.CreateQP(cfg)
		if err != nil {
			return fail(fmt.Errorf("rank %d: create QP for queue %s: %w", rank, s.name, err))
		}
		res.qps = append(res.qps, qp)
	}
	return res, nil
}

// endpoint is what this rank hands its peers.
func (r *rankRes) endpoint() Endpoint {
	ep := Endpoint{Rank: r.rank}
	for _, qp := range r.qps {
		ep.QPs = append(ep.QPs, qp.Info())
	}
	for _, mr := range r.mrs {
		ep.MRs = append(ep.MRs, mr.Remote())
	}
	for _, mr := range r.partMRs {
		ep.MRs = append(ep.MRs, mr.Remote())
	}
	return ep
}

// countedParts lists the regions of rank that its waits count the landed writes of, each once, in
// the order of the waits: what a device that counts per registration registers on its own. A
// whole buffer is registered again too, so that only the writes name the counted registration's
// key: libfabric counts a remote atomic as a remote write, and atomics keep the buffer's key.
// Counted regions that overlap are refused: such a device counts a write by the one registration
// whose key it names.
func countedParts(g *ir.Graph, rank int) ([]ir.Slice, error) {
	var regions []ir.Slice
	var waits []ir.OpID
	first, end := g.RankOps(rank)
	for o := first; o < end; o++ {
		op := &g.Ops[o]
		if op.Kind != ir.OpWait || op.WaitsWord() || slices.Contains(regions, op.Dst) {
			continue
		}
		for i, s := range regions {
			if s.Overlaps(op.Dst) {
				return nil, fmt.Errorf("%s: rank %d: wait %s counts the writes that land in %s, which overlaps %s, the region of wait %s: a device that counts remote writes per registration (libfabric's fi_mr_bind) counts a write in one region only (count regions that do not overlap)",
					op.Pos, rank, op.Name, g.SliceString(op.Dst), g.SliceString(s), g.Ops[waits[i]].Name)
			}
		}
		regions = append(regions, op.Dst)
		waits = append(waits, o)
	}
	return regions, nil
}

// countMR is the registration and the bytes [off, off+n) of it that count the writes that land
// in region s of this rank: the region's own registration where the device counts per
// registration, else the buffer's.
func (r *rankRes) countMR(g *ir.Graph, s ir.Slice) (mr nic.MR, off, n uint64) {
	sz := uint64(g.Buffers[s.Buf].Type.Size())
	if j := slices.Index(r.parts, s); j >= 0 {
		return r.partMRs[j], 0, uint64(s.Len) * sz
	}
	return r.mrs[s.Buf], uint64(s.Off) * sz, uint64(s.Len) * sz
}

// connect brings every QP of the rank to RTS: graph queues to their peer's paired queue,
// local-only queues to themselves.
func (r *rankRes) connect(g *ir.Graph, eps []Endpoint) error {
	r.peers = eps
	for i, s := range r.layout.qps {
		var remote nic.QPInfo
		if s.graphQueue == ir.None {
			remote = r.qps[i].Info()
		} else {
			q := &g.Queues[s.graphQueue]
			if q.Peer == ir.None {
				return fmt.Errorf("%s: rank %d queue %s has no paired queue on rank %d", q.Pos, r.rank, q.Name, q.PeerRank)
			}
			peer := q.PeerRank
			if peer < 0 || peer >= len(eps) || eps[peer].Rank != peer {
				return fmt.Errorf("%s: rank %d queue %s: no connection information for peer rank %d", q.Pos, r.rank, q.Name, peer)
			}
			idx := int(q.Peer - g.Rank[peer].FirstQueue)
			if idx < 0 || idx >= len(eps[peer].QPs) {
				return fmt.Errorf("%s: rank %d queue %s: peer rank %d sent %d queue ends, needs #%d", q.Pos, r.rank, q.Name, peer, len(eps[peer].QPs), idx)
			}
			remote = eps[peer].QPs[idx]
		}
		if err := r.qps[i].Connect(remote); err != nil {
			return fmt.Errorf("rank %d: connect queue %s to %s: %w", r.rank, s.name, remote, err)
		}
	}
	return nil
}

// close releases everything, QPs first, after dropping the triggered work that would post on
// them. Every object is tried whatever the others' errors, which it joins, each naming the rank
// and the object. A device that cannot drop its triggered work
// (libfabric's sockets) refuses to close a queue such work would post on: its own Close then
// releases everything, in the order that keeps the work from starting.
func (r *rankRes) close() error {
	var errs []error
	closed := func(err error, what string, args ...any) {
		if err != nil {
			errs = append(errs, fmt.Errorf("rank %d: closing %s: %w", r.rank, fmt.Sprintf(what, args...), err))
		}
	}
	if tc, ok := r.dev.(nic.TriggerContext); ok {
		if tc.CancelTriggers(); tc.PendingTriggers() > 0 {
			closed(r.dev.Close(), "the device context, with triggered work still armed")
			return errors.Join(errs...)
		}
	}
	for i, qp := range r.qps {
		closed(qp.Close(), "queue pair %d", i)
	}
	for i, cq := range r.cqs {
		closed(cq.Close(), "completion queue %d", i)
	}
	for i, mr := range r.partMRs {
		closed(mr.Close(), "the memory region of counted part %d", i)
	}
	for i, mr := range r.mrs {
		closed(mr.Close(), "the memory region of buffer %d", i)
	}
	if r.pd != nil {
		closed(r.pd.Close(), "the protection domain")
	}
	if r.dev != nil {
		closed(r.dev.Close(), "the device context")
	}
	return errors.Join(errs...)
}

// tornDown is err, the reason for a teardown (nil: none), with what the teardown itself failed
// to release.
func tornDown(err, teardown error) error {
	if err == nil || teardown == nil {
		return cmp.Or(err, teardown)
	}
	return fmt.Errorf("%w (and tearing down: %v)", err, teardown)
}

// checkSGELen refuses a work request of rank's whose local slice is longer than an SGE's
// length (nic.SGE.Len, 32 bits) holds: it would move its length modulo 4 GiB.
func checkSGELen(plan *ir.Plan, rank int) error {
	g := plan.Graph
	rp := &plan.Ranks[rank]
	for i := range rp.Queues {
		for k := range rp.Queues[i].Chain {
			w := &rp.Queues[i].Chain[k]
			if !w.Opcode.IsData() {
				continue
			}
			for _, s := range plan.LocalSegs(w) {
				if n := s.Len * g.Buffers[s.Buf].Type.Size(); n > math.MaxUint32 {
					op := plan.OpOf(w)
					return fmt.Errorf("%s: op %s on rank %d moves %s (%d bytes) in one slice, more than a work request's %d bytes (split it into several ops)",
						op.Pos, op.Name, rank, budget.Format(n), n, uint32(math.MaxUint32))
				}
			}
		}
	}
	return nil
}

// local is the SGE of slice s of this rank's memory (Len 0 when s is absent).
func (r *rankRes) local(g *ir.Graph, s ir.Seg) nic.SGE {
	if !s.Valid() {
		return nic.SGE{}
	}
	sz := g.Buffers[s.Buf].Type.Size()
	mr := r.mrs[s.Buf]
	return nic.SGE{Addr: mr.Addr() + uint64(s.Off*sz), Len: uint32(s.Len * sz), LKey: mr.LKey()}
}

// more is the SGE list of a scatter/gather list's further segments (nil when there are none).
func (r *rankRes) more(g *ir.Graph, segs []ir.Slice) []nic.SGE {
	var out []nic.SGE
	for _, s := range segs {
		out = append(out, r.local(g, s.Seg()))
	}
	return out
}

// remote is the address and rkey of slice s on peer rank.
func (r *rankRes) remote(g *ir.Graph, peer int, s ir.Seg) (uint64, uint32) {
	if !s.Valid() || peer < 0 || peer >= len(r.peers) || int(s.Buf) >= len(r.peers[peer].MRs) {
		return 0, 0
	}
	sz := g.Buffers[s.Buf].Type.Size()
	m := r.peers[peer].MRs[s.Buf]
	return m.Addr + uint64(s.Off*sz), m.RKey
}

// remoteWrite is the address and rkey a write into slice s of peer rank names: on a device that
// counts remote writes per registration, those of the peer's counted region that holds s (so the
// region's counter counts it), else those of the buffer.
func (r *rankRes) remoteWrite(g *ir.Graph, peer int, s ir.Seg) (uint64, uint32) {
	if !r.perReg || !s.Valid() || peer < 0 || peer >= len(r.peers) {
		return r.remote(g, peer, s)
	}
	parts, ok := r.peerParts[peer]
	if !ok {
		parts, _ = countedParts(g, peer) // an error refused the peer's own setup
		if r.peerParts == nil {
			r.peerParts = map[int][]ir.Slice{}
		}
		r.peerParts[peer] = parts
	}
	for j, p := range parts {
		k := len(g.Buffers) + j
		if p.Buf != s.Buf || s.Off < p.Off || s.Off+s.Len > p.Off+p.Len || k >= len(r.peers[peer].MRs) {
			continue
		}
		m := r.peers[peer].MRs[k]
		return m.Addr + uint64((s.Off-p.Off)*g.Buffers[s.Buf].Type.Size()), m.RKey
	}
	return r.remote(g, peer, s)
}

// dataWR builds the send-queue work request of graph op id (send, write, read or atomic); a
// send or write goes inline when inline is set and its payload fits the rank's QPs.
func (r *rankRes) dataWR(g *ir.Graph, id ir.OpID, inline bool) nic.SendWR {
	op := &g.Ops[id]
	peer := peerRank(g, op)
	wr := nic.SendWR{ID: uint64(id)}
	switch op.Kind {
	case ir.OpSend:
		wr.Op, wr.Local = nic.OpSend, r.local(g, op.Src.Seg())
	case ir.OpWrite:
		wr.Op, wr.Local = nic.OpRDMAWrite, r.local(g, op.Src.Seg())
		if op.Notify {
			wr.Op = nic.OpRDMAWriteImm
			wr.Imm = uint32(id)
		}
		wr.RemoteAddr, wr.RKey = r.remoteWrite(g, peer, op.Dst.Seg())
	case ir.OpRead:
		wr.Op, wr.Local = nic.OpRDMARead, r.local(g, op.Dst.Seg())
		wr.RemoteAddr, wr.RKey = r.remote(g, peer, op.Src.Seg())
	case ir.OpAtomicAdd, ir.OpAtomicCAS:
		wr.Op, wr.Local = nic.OpAtomicFAdd, r.local(g, op.Fetch().Seg())
		if op.Kind == ir.OpAtomicCAS {
			wr.Op = nic.OpAtomicCAS
		}
		wr.CompareAdd, wr.Swap = uint64(op.A()), uint64(op.B())
		wr.RemoteAddr, wr.RKey = r.remote(g, peer, op.Dst.Seg())
	}
	if _, list := op.ListSide(); list {
		wr.More = r.more(g, op.More())
	}
	if n := nic.SGLen(wr.Local, wr.More); inline && (op.Kind == ir.OpSend || op.Kind == ir.OpWrite) && n > 0 && n <= uint64(r.layout.maxInline) {
		wr.Flags |= nic.FlagInline
	}
	return wr
}

// closeOnPanic, deferred, calls release when the function panics, and panics on: whoever
// recovers the panic (a start's recover) must not be left with devices nobody closes.
func closeOnPanic(release func()) {
	if r := recover(); r != nil {
		release()
		panic(r)
	}
}

// setupRanks opens and connects the ranks this process runs. exchange hands every local
// endpoint to the other processes and returns all ranks' endpoints indexed by rank; nil means
// every rank is local.
func setupRanks(ctx context.Context, p nic.Provider, g *ir.Graph, ranks []int, layout func(rank int) (rankLayout, error),
	exchange func(context.Context, []Endpoint) ([]Endpoint, error), bound Bound) ([]*rankRes, error) {
	var res []*rankRes
	fail := func(err error) ([]*rankRes, error) {
		for _, r := range res {
			err = tornDown(err, r.close())
		}
		return nil, err
	}
	defer closeOnPanic(func() { _, _ = fail(nil) }) // a panicking Exchange, say
	// Every rank's layout first: its refusals (a slice past a work request, IDs the offload
	// engine cannot tell apart) come before any rank has opened a device or allocated memory.
	layouts := make([]rankLayout, len(ranks))
	for i, rank := range ranks {
		var err error
		if layouts[i], err = layout(rank); err != nil {
			return nil, err
		}
	}
	for i, rank := range ranks {
		r, err := openRank(p, g, rank, layouts[i], bound)
		if err != nil {
			return fail(err)
		}
		res = append(res, r)
	}
	local := make([]Endpoint, len(res))
	for i, r := range res {
		local[i] = r.endpoint()
	}
	var all []Endpoint
	if exchange != nil {
		var err error
		if all, err = exchange(ctx, local); err != nil {
			return fail(fmt.Errorf("exchange connection information: %w", err))
		}
	} else {
		all = make([]Endpoint, g.Ranks)
		for i := range all {
			all[i].Rank = -1
		}
		for _, ep := range local {
			all[ep.Rank] = ep
		}
	}
	for _, r := range res {
		if err := r.connect(g, all); err != nil {
			return fail(err)
		}
	}
	return res, nil
}
