package predict

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"

	"github.com/coredag/coredag/ir"
)

// A symmetric plan is simulated on one rank. When every rank's ops are rank 0's with their
// peers moved by a group of permutations of the ranks (rank r runs rank 0's program with peer p
// replaced by the image of p under the element that takes 0 to r), every rank of the simulation
// does what rank 0 does at the same times: the model is deterministic and every rank starts at
// time 0 with its own CPU and NIC. So the message rank 0 receives on a queue from its peer is
// the one rank 0 itself sends on the peer's queue, at the same time: the plan folds onto one
// rank whose queues connect to its own (Fold), and simulating that one rank is simulating all.
//
// Whether a plan is symmetric is checked on the ranks elaborated, not proven for the others
// unless all of them were (Symmetry.Complete): rank r's ops are compared with rank 0's.

// Group is a group of permutations of the ranks a plan may be symmetric under; its element k
// takes rank 0 to rank k.
type Group uint8

// The groups Fold tries, in this order.
const (
	// Rotation: element k takes rank r to (r + k) mod ranks (rings, and most plans whose
	// peers are rank ± d).
	Rotation Group = iota + 1
	// Xor: element k takes rank r to r xor k, on a power-of-two world (recursive doubling,
	// butterflies).
	Xor
)

func (gr Group) String() string {
	switch gr {
	case Rotation:
		return "rotation (rank r -> r + k mod ranks)"
	case Xor:
		return "xor (rank r -> r xor k)"
	}
	return "no group"
}

// apply is the image of rank r under element k of the group, on n ranks.
func (gr Group) apply(k, r, n int) int {
	if gr == Xor {
		return r ^ k
	}
	return (r + k) % n
}

// RankSample is what Fold reads: some ranks of a plan elaborated at its full world size, as the
// elaborator's ElaborateRanks makes them.
type RankSample struct {
	// Graph holds the ops, queues and edges of the ranks of Ranks (Graph.Rank spans them;
	// the spans of other ranks are empty); Graph.Ranks is the world size. Queues need not
	// be paired nor messages matched.
	Graph *ir.Graph
	// Ranks are the ranks Graph holds; rank 0 must be one of them.
	Ranks []int
	// PeerNames holds, per queue of Graph, the name of the queue it pairs with on its PeerRank.
	PeerNames []string
}

// Symmetry is what Fold found.
type Symmetry struct {
	Group   Group
	Ranks   int   // the world size
	Checked []int // the ranks found to be rank 0 under the group (rank 0 not counted)
}

// Complete reports whether every rank was compared with rank 0: then the plan's ops are
// symmetric (as far as the model reads them), not assumed to be.
func (s Symmetry) Complete() bool { return len(s.Checked) == s.Ranks-1 }

// SampleRanks chooses the ranks to compare with rank 0 on a world of n ranks: every rank when
// n <= k+1, else k of them, among them 1, 2, n/2 and n-1 and the others spread by a fixed
// pseudo-random sequence (the same on every run). Rank 0 comes first.
func SampleRanks(n, k int) []int {
	if n <= k+1 {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	seen := map[int]bool{0: true}
	out := []int{0}
	add := func(r int) {
		if r > 0 && r < n && !seen[r] && len(out) < k+1 {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, r := range []int{1, n - 1, n / 2, 2, n/2 + 1, n / 3} {
		add(r)
	}
	x := uint64(n)*0x9e3779b97f4a7c15 + 1
	for len(out) < k+1 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		add(int(x % uint64(n)))
	}
	return out
}

// Fold checks that the sampled ranks of s are rank 0 under a group of permutations (Rotation,
// then Xor), and returns the plan folded onto one rank: rank 0's ops, queues and edges, each
// queue connected to rank 0's queue that is the image of its peer's, and the messages matched
// as the peers match them. The folded plan is simulated as the whole plan (Simulate, with
// Params.Workers 0). What is compared, for every op in order: its kind, name, queue, position
// on its queue, buffers and lengths (not offsets: the model costs bytes, not addresses); for
// every queue its name, depth and peer, moved by the group; and the `after` edges. The error
// says why the plan is not symmetric, naming the first difference.
func Fold(s RankSample) (*ir.Graph, Symmetry, error) {
	g := s.Graph
	if g == nil || len(s.PeerNames) != len(g.Queues) || len(g.Rank) != g.Ranks {
		return nil, Symmetry{}, fmt.Errorf("predict: fold: a malformed sample")
	}
	if !slices.Contains(s.Ranks, 0) {
		return nil, Symmetry{}, fmt.Errorf("predict: fold: the sample has no rank 0")
	}
	others := slices.DeleteFunc(slices.Clone(s.Ranks), func(r int) bool { return r == 0 })
	slices.Sort(others)
	for i, r := range others {
		if r < 0 || r >= g.Ranks {
			return nil, Symmetry{}, fmt.Errorf("predict: fold: sampled rank %d is not one of the plan's %d", r, g.Ranks)
		}
		if i > 0 && others[i-1] == r {
			return nil, Symmetry{}, fmt.Errorf("predict: fold: rank %d is sampled twice", r)
		}
	}
	edges := rankEdges(g)
	var why []string
	for _, gr := range []Group{Rotation, Xor} {
		if gr == Xor && bits.OnesCount(uint(g.Ranks)) != 1 {
			continue
		}
		bad := ""
		for _, r := range others {
			if bad = sameUnder(s, edges, r, gr); bad != "" {
				break
			}
		}
		if bad == "" {
			bad = pairsUnder(s, gr)
		}
		if bad != "" {
			why = append(why, fmt.Sprintf("under %s, %s", gr, bad))
			continue
		}
		f, err := fold(s)
		if err != nil {
			return nil, Symmetry{}, err
		}
		return f, Symmetry{Group: gr, Ranks: g.Ranks, Checked: others}, nil
	}
	if len(why) == 0 {
		return nil, Symmetry{}, fmt.Errorf("predict: the plan is not symmetric")
	}
	msg := why[0]
	for _, w := range why[1:] {
		msg += "; " + w
	}
	return nil, Symmetry{}, fmt.Errorf("predict: the plan is not symmetric: %s", msg)
}

// sameUnder compares rank r of the sample with rank 0 under gr; it returns the first
// difference, or "".
func sameUnder(s RankSample, edges map[int32][][2]int, r int, gr Group) string {
	g := s.Graph
	a, b := g.Rank[0], g.Rank[r]
	na, nb := int(a.EndOp-a.FirstOp), int(b.EndOp-b.FirstOp)
	qa, qb := int(a.EndQueue-a.FirstQueue), int(b.EndQueue-b.FirstQueue)
	if na != nb {
		return fmt.Sprintf("rank %d has %d ops and rank 0 %d", r, nb, na)
	}
	if qa != qb {
		return fmt.Sprintf("rank %d has %d queues and rank 0 %d", r, qb, qa)
	}
	for i := range qa {
		x, y := &g.Queues[int(a.FirstQueue)+i], &g.Queues[int(b.FirstQueue)+i]
		px, py := s.PeerNames[int(a.FirstQueue)+i], s.PeerNames[int(b.FirstQueue)+i]
		switch want := gr.apply(r, x.PeerRank, g.Ranks); {
		case x.Name != y.Name || px != py:
			return fmt.Sprintf("rank %d's queue %d is %s (peer %s), rank 0's %s (peer %s)", r, i, y.Name, py, x.Name, px)
		case x.Depth != y.Depth:
			return fmt.Sprintf("rank %d's queue %s has depth %d, rank 0's %d", r, y.Name, y.Depth, x.Depth)
		case y.PeerRank != want:
			return fmt.Sprintf("rank %d's queue %s connects to rank %d, where rank 0's connects to rank %d (rank %d moved)", r, y.Name, y.PeerRank, x.PeerRank, want)
		}
	}
	for k := range na {
		x, y := &g.Ops[int(a.FirstOp)+k], &g.Ops[int(b.FirstOp)+k]
		if d := sameOp(g, a, b, x, y); d != "" {
			return fmt.Sprintf("rank %d's op %s %s rank 0's %s", r, y.Name, d, x.Name)
		}
	}
	ea, eb := edges[0], edges[int32(r)]
	if len(ea) != len(eb) {
		return fmt.Sprintf("rank %d has %d `after` edges and rank 0 %d", r, len(eb), len(ea))
	}
	for i := range ea {
		if ea[i] != eb[i] {
			e := eb[i]
			return fmt.Sprintf("rank %d has an edge from %s to %s that rank 0 has not", r, g.Ops[int(b.FirstOp)+e[0]].Name, g.Ops[int(b.FirstOp)+e[1]].Name)
		}
	}
	return ""
}

// sameOp compares op y of the rank spanned by b with op x of rank 0 (spanned by a): how they
// differ, or "".
func sameOp(g *ir.Graph, a, b ir.RankSpan, x, y *ir.Op) string {
	local := func(q ir.QueueID, at ir.QueueID) int {
		if q == ir.None {
			return -1
		}
		return int(q - at)
	}
	switch {
	case x.Name != y.Name:
		return "is in the place of"
	case x.Kind != y.Kind || x.Red != y.Red || x.Inline != y.Inline || x.Notify != y.Notify:
		return fmt.Sprintf("is a %s, where it is a %s on", y.Kind, x.Kind)
	case local(x.Queue, a.FirstQueue) != local(y.Queue, b.FirstQueue) || x.Index != y.Index:
		return "is on another queue, or at another place on it, than"
	case !sameSegs(g, x.SrcSegs(), y.SrcSegs()) || !sameSegs(g, x.DstSegs(), y.DstSegs()) || !sameSegs(g, []ir.Slice{x.Fetch()}, []ir.Slice{y.Fetch()}):
		return fmt.Sprintf("moves %d bytes (%s to %s), where it moves %d (%s to %s) on", g.SegsBytes(y.SrcSegs()), g.SegsString(y.SrcSegs()), g.SegsString(y.DstSegs()),
			g.SegsBytes(x.SrcSegs()), g.SegsString(x.SrcSegs()), g.SegsString(x.DstSegs()))
	}
	return ""
}

// sameSegs reports whether two slice lists are on the same buffers with the same lengths.
func sameSegs(g *ir.Graph, x, y []ir.Slice) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i].Valid() != y[i].Valid() {
			return false
		}
		if x[i].Valid() && (x[i].Buf != y[i].Buf || g.Bytes(x[i]) != g.Bytes(y[i])) {
			return false
		}
	}
	return true
}

// rankEdges are the `after` edges of every rank by the ops' places in their rank, sorted.
func rankEdges(g *ir.Graph) map[int32][][2]int {
	out := map[int32][][2]int{}
	for _, e := range g.Edges {
		r := g.Ops[e.To].Rank
		first := g.Rank[r].FirstOp
		out[r] = append(out[r], [2]int{int(e.From - first), int(e.To - first)})
	}
	for _, es := range out {
		slices.SortFunc(es, func(p, q [2]int) int {
			if c := cmp.Compare(p[0], q[0]); c != 0 {
				return c
			}
			return cmp.Compare(p[1], q[1])
		})
	}
	return out
}

// peerOf is the index, among rank 0's queues, of the queue its queue i pairs with, moved to
// rank 0 by the group: the queue of rank 0 whose name is the peer's name, or -1.
func peerOf(s RankSample, i int) int {
	sp := s.Graph.Rank[0]
	for j := range int(sp.EndQueue - sp.FirstQueue) {
		if s.Graph.Queues[int(sp.FirstQueue)+j].Name == s.PeerNames[int(sp.FirstQueue)+i] {
			return j
		}
	}
	return -1
}

// pairsUnder checks that rank 0's queues pair mutually when every rank is rank 0 under gr: the
// peer p of queue i has (by the symmetry) rank 0's queue j named as i's peer, moved to p; that
// queue must connect back to rank 0 and name queue i.
func pairsUnder(s RankSample, gr Group) string {
	g := s.Graph
	sp := g.Rank[0]
	for i := range int(sp.EndQueue - sp.FirstQueue) {
		q := &g.Queues[int(sp.FirstQueue)+i]
		j := peerOf(s, i)
		if j < 0 {
			return fmt.Sprintf("queue %s connects to rank %d's queue %s, which rank 0 has not (every rank's queues are rank 0's)", q.Name, q.PeerRank, s.PeerNames[int(sp.FirstQueue)+i])
		}
		back := &g.Queues[int(sp.FirstQueue)+j]
		if to := gr.apply(q.PeerRank, back.PeerRank, g.Ranks); to != 0 || s.PeerNames[int(sp.FirstQueue)+j] != q.Name {
			return fmt.Sprintf("rank 0's queue %s connects to rank %d's queue %s, which (as rank 0's %s moved) connects to rank %d's %s, not back",
				q.Name, q.PeerRank, back.Name, back.Name, to, s.PeerNames[int(sp.FirstQueue)+j])
		}
	}
	return ""
}

// fold builds the one-rank plan from rank 0 of s (whose pairing pairsUnder checked).
func fold(s RankSample) (*ir.Graph, error) {
	g := s.Graph
	sp := g.Rank[0]
	n, nq := int(sp.EndOp-sp.FirstOp), int(sp.EndQueue-sp.FirstQueue)
	f := &ir.Graph{Name: g.Name, File: g.File, Ranks: 1, Params: slices.Clone(g.Params), Buffers: slices.Clone(g.Buffers),
		Expects: slices.Clone(g.Expects), Spots: g.Spots}
	f.Ops = slices.Clone(g.Ops[sp.FirstOp:sp.EndOp])
	for i := range f.Ops {
		op := &f.Ops[i]
		if op.Queue != ir.None {
			op.Queue -= sp.FirstQueue
		}
		op.Match = ir.None
	}
	f.Queues = slices.Clone(g.Queues[sp.FirstQueue:sp.EndQueue])
	for i := range f.Queues {
		q := &f.Queues[i]
		q.PeerRank, q.Peer = 0, ir.QueueID(peerOf(s, i))
		q.SendOps, q.RecvOps = slices.Clone(q.SendOps), slices.Clone(q.RecvOps)
		for k := range q.SendOps {
			q.SendOps[k] -= sp.FirstOp
		}
		for k := range q.RecvOps {
			q.RecvOps[k] -= sp.FirstOp
		}
	}
	for _, e := range g.Edges {
		if e.To >= sp.FirstOp && e.To < sp.EndOp {
			e.From -= sp.FirstOp
			e.To -= sp.FirstOp
			f.Edges = append(f.Edges, e)
		}
	}
	f.Rank = []ir.RankSpan{{EndOp: ir.OpID(n), EndQueue: ir.QueueID(nq)}}
	// The messages: the k-th send (or notify write) on a queue meets the k-th recv its peer
	// posts, which is rank 0's on the queue that is the peer's, moved.
	for i := range f.Queues {
		q := &f.Queues[i]
		peer := &f.Queues[q.Peer]
		var err error
		f.MatchQueue(ir.QueueID(i), func(m ir.MatchFault) bool {
			const not = "predict: the plan is not symmetric: "
			switch m.Kind {
			case ir.UnmatchedSend:
				op := &f.Ops[m.Send]
				err = fmt.Errorf(not+"%s %s on queue %s has no recv to meet on its peer's %s (rank 0 posts %d there)", op.Kind, op.Name, q.Name, peer.Name, len(peer.RecvOps))
			case ir.UnmatchedRecv:
				err = fmt.Errorf(not+"queue %s sends %d messages, and the queue of its peer, %s, posts %d recvs", q.Name, m.Sent, peer.Name, len(peer.RecvOps))
			default:
				op, rv := &f.Ops[m.Send], &f.Ops[m.Recv]
				err = fmt.Errorf(not+"%s %s of %d bytes on queue %s meets recv %s of %d bytes on its peer's %s", op.Kind, op.Name, f.SegsBytes(op.SrcSegs()), q.Name, rv.Name, f.SegsBytes(rv.DstSegs()), peer.Name)
			}
			return false
		})
		if err != nil {
			return nil, err
		}
	}
	return f.Freeze(), nil
}
