package msccl_test

// A small generator of MSCCL-IR algorithms, written the way msccl-tools lays them out (one
// threadblock per connection, fused steps, depid/deps with nops for extra dependencies), for
// the msccl-tools example algorithms: ring, allpairs, recursive halving/doubling, hierarchical
// allreduce and two-step alltoall.

import (
	"fmt"
	"sort"
	"strings"
)

type xstep struct {
	typ      string
	sb       byte
	so       int
	db       byte
	do       int
	cnt      int
	deps     []dep // other threadblocks' steps this one waits for
	position string
}

type dep struct {
	tb   *xtb
	step int // index among the tb's steps before nops
}

type xtb struct {
	send, recv, ch int
	steps          []*xstep
}

type xgpu struct {
	i, o, s int
	tbs     []*xtb
}

type xalgo struct {
	name, coll string
	inplace    bool
	gpus       []*xgpu
}

func newAlgo(name, coll string, n int, inplace bool, i, o, s int) *xalgo {
	a := &xalgo{name: name, coll: coll, inplace: inplace}
	for range n {
		a.gpus = append(a.gpus, &xgpu{i: i, o: o, s: s})
	}
	return a
}

// tb returns GPU r's threadblock for (send, recv, ch), creating it.
func (a *xalgo) tb(r, send, recv, ch int) *xtb {
	for _, t := range a.gpus[r].tbs {
		if t.send == send && t.recv == recv && t.ch == ch {
			return t
		}
	}
	t := &xtb{send: send, recv: recv, ch: ch}
	a.gpus[r].tbs = append(a.gpus[r].tbs, t)
	return t
}

// add appends a step and returns a reference to it.
func (t *xtb) add(typ string, sb byte, so int, db byte, do, cnt int, deps ...dep) dep {
	var ds []dep
	for _, d := range deps {
		if d.tb != nil && d.tb != t {
			ds = append(ds, d)
		}
	}
	t.steps = append(t.steps, &xstep{typ: typ, sb: sb, so: so, db: db, do: do, cnt: cnt, deps: ds})
	return dep{t, len(t.steps) - 1}
}

func (t *xtb) last() dep {
	if len(t.steps) == 0 {
		return dep{}
	}
	return dep{t, len(t.steps) - 1}
}

// xml writes the algorithm as msccl-tools' ir_to_xml does (old format).
func (a *xalgo) xml() []byte {
	var b strings.Builder
	nch := 0
	for _, g := range a.gpus {
		for _, t := range g.tbs {
			nch = max(nch, t.ch+1)
		}
	}
	fmt.Fprintf(&b, "<algo name=%q proto=\"Simple\" nchannels=\"%d\" nchunksperloop=\"%d\" ngpus=\"%d\" coll=%q inplace=\"%d\">\n",
		a.name, nch, max(a.gpus[0].i, a.gpus[0].o), len(a.gpus), a.coll, map[bool]int{false: 0, true: 1}[a.inplace])
	for r, g := range a.gpus {
		sort.SliceStable(g.tbs, func(i, j int) bool {
			x, y := g.tbs[i], g.tbs[j]
			if x.send != y.send {
				return x.send < y.send
			}
			if x.recv != y.recv {
				return x.recv < y.recv
			}
			return x.ch < y.ch
		})
		id := map[*xtb]int{}
		idx := map[*xstep]int{}
		has := map[*xstep]bool{}
		for i, t := range g.tbs {
			id[t] = i
			n := 0
			for _, s := range t.steps {
				n += max(len(s.deps)-1, 0)
				idx[s] = n
				n++
				for _, d := range s.deps {
					has[d.tb.steps[d.step]] = true
				}
			}
		}
		fmt.Fprintf(&b, "  <gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"%d\" s_chunks=\"%d\">\n", r, g.i, g.o, g.s)
		for _, t := range g.tbs {
			fmt.Fprintf(&b, "    <tb id=\"%d\" send=\"%d\" recv=\"%d\" chan=\"%d\">\n", id[t], t.send, t.recv, t.ch)
			n := 0
			for _, s := range t.steps {
				for _, d := range s.deps[min(1, len(s.deps)):] {
					fmt.Fprintf(&b, "      <step s=\"%d\" type=\"nop\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"o\" dstoff=\"-1\" cnt=\"0\" depid=\"%d\" deps=\"%d\" hasdep=\"0\"/>\n", n, id[d.tb], idx[d.tb.steps[d.step]])
					n++
				}
				depid, deps := -1, -1
				if len(s.deps) > 0 {
					depid, deps = id[s.deps[0].tb], idx[s.deps[0].tb.steps[s.deps[0].step]]
				}
				hd := 0
				if has[s] {
					hd = 1
				}
				fmt.Fprintf(&b, "      <step s=\"%d\" type=\"%s\" srcbuf=\"%c\" srcoff=\"%d\" dstbuf=\"%c\" dstoff=\"%d\" cnt=\"%d\" depid=\"%d\" deps=\"%d\" hasdep=\"%d\"/>\n",
					n, s.typ, s.sb, s.so, s.db, s.do, s.cnt, depid, deps, hd)
				n++
			}
			b.WriteString("    </tb>\n")
		}
		b.WriteString("  </gpu>\n")
	}
	b.WriteString("</algo>\n")
	return []byte(b.String())
}

func mod(a, n int) int { return ((a % n) + n) % n }

// ringAllreduce: the fused ring of msccl-tools (s, rrs..., rrcs, rcs..., r), in place, one
// chunk per rank and channel.
func ringAllreduce(n, nch int) *xalgo {
	a := newAlgo(fmt.Sprintf("ring_allreduce_%d_%d", n, nch), "allreduce", n, true, n*nch, 0, 0)
	for r := 0; r < n; r++ {
		for ch := 0; ch < nch; ch++ {
			t := a.tb(r, mod(r+1, n), mod(r-1, n), ch)
			c := func(x int) int { return mod(x, n)*nch + ch }
			t.add("s", 'i', c(r), 'i', c(r), 1)
			for k := 1; k < n-1; k++ {
				t.add("rrs", 'i', c(r-k), 'i', c(r-k), 1)
			}
			t.add("rrcs", 'i', c(r+1), 'i', c(r+1), 1)
			for k := n; k < 2*n-2; k++ {
				t.add("rcs", 'i', c(r-k+n), 'i', c(r-k+n), 1)
			}
			t.add("r", 'i', c(r+2), 'i', c(r+2), 1)
		}
	}
	return a
}

// allpairsAllreduce: every rank sends each peer its chunk, reduces what it gets in a local
// threadblock (nops carry the extra dependencies), then sends the result to every peer.
func allpairsAllreduce(n int) *xalgo {
	a := newAlgo(fmt.Sprintf("allpairs_allreduce_%d", n), "allreduce", n, true, n, 0, n-1)
	for r := 0; r < n; r++ {
		var got []dep
		var peers []*xtb
		for p := 0; p < n; p++ {
			if p == r {
				continue
			}
			t := a.tb(r, p, p, 0)
			peers = append(peers, t)
			slot := p
			if p > r {
				slot--
			}
			t.add("s", 'i', p, 's', 0, 1)
			got = append(got, t.add("r", 'i', r, 's', slot, 1))
		}
		loc := a.tb(r, -1, -1, 0)
		for k := 0; k < n-1; k++ {
			var deps []dep
			if k == 0 {
				deps = got
			}
			loc.add("re", 's', k, 'i', r, 1, deps...)
		}
		for i, t := range peers {
			p := i
			if p >= r {
				p++
			}
			t.add("s", 'i', r, 'i', r, 1, loc.last())
			t.add("r", 'i', p, 'i', p, 1)
		}
	}
	return a
}

// recursiveHalvingDoubling: reduce-scatter by recursive halving (s + rrc per round), then
// allgather by recursive doubling (s + r), one threadblock per peer, depid between rounds.
func recursiveHalvingDoubling(n int) *xalgo {
	a := newAlgo(fmt.Sprintf("rhd_allreduce_%d", n), "allreduce", n, true, n, 0, 0)
	for r := 0; r < n; r++ {
		lo, hi := 0, n
		var prev dep
		var kept [][2]int
		var tbs []*xtb
		for b := n / 2; b >= 1; b /= 2 {
			p := r ^ b
			t := a.tb(r, p, p, 0)
			tbs = append(tbs, t)
			mid := (lo + hi) / 2
			klo, khi, slo, shi := lo, mid, mid, hi
			if r&b != 0 {
				klo, khi, slo, shi = mid, hi, lo, mid
			}
			t.add("s", 'i', slo, 'i', slo, shi-slo, prev)
			prev = t.add("rrc", 'i', klo, 'i', klo, khi-klo)
			kept = append(kept, [2]int{klo, khi})
			lo, hi = klo, khi
		}
		for j := len(tbs) - 1; j >= 0; j-- {
			t := tbs[j]
			own := kept[j]
			t.add("s", 'i', own[0], 'i', own[0], own[1]-own[0], prev)
			var olo, ohi int // what the peer owns: the other half of round j
			if j == 0 {
				olo, ohi = 0, n
			} else {
				olo, ohi = kept[j-1][0], kept[j-1][1]
			}
			if own[0] == olo {
				olo = own[1]
			} else {
				ohi = own[0]
			}
			prev = t.add("r", 'i', olo, 'i', olo, ohi-olo)
		}
	}
	return a
}

// ringPhase appends a ring reduce-scatter (rs) or allgather over members (ranks in ring order)
// of blocks of cnt chunks, block b at first+b*cnt; member m ends owning block m+1 (rs) or starts
// owning it (allgather). after is what each member's first step waits for.
func ringPhase(a *xalgo, members []int, first, cnt, ch int, rs bool, after []dep) []dep {
	m := len(members)
	ends := make([]dep, m)
	for i, r := range members {
		t := a.tb(r, members[mod(i+1, m)], members[mod(i-1, m)], ch)
		blk := func(b int) int { return first + mod(b, m)*cnt }
		if rs {
			t.add("s", 'i', blk(i), 'i', blk(i), cnt, after[i])
			for k := 1; k < m-1; k++ {
				t.add("rrs", 'i', blk(i-k), 'i', blk(i-k), cnt)
			}
			ends[i] = t.add("rrc", 'i', blk(i+1), 'i', blk(i+1), cnt)
		} else {
			t.add("s", 'i', blk(i+1), 'i', blk(i+1), cnt, after[i])
			for k := 1; k < m-1; k++ {
				t.add("rcs", 'i', blk(i+1-k), 'i', blk(i+1-k), cnt)
			}
			ends[i] = t.add("r", 'i', blk(i+2), 'i', blk(i+2), cnt)
		}
	}
	return ends
}

// hierarchicalAllreduce: ring reduce-scatter inside each node, ring allreduce across nodes on
// the part each GPU owns, ring allgather inside each node (msccl-tools' hierarchical_allreduce).
func hierarchicalAllreduce(nodes, per int) *xalgo {
	n := nodes * per
	a := newAlgo(fmt.Sprintf("hierarchical_allreduce_%dx%d", nodes, per), "allreduce", n, true, n, 0, 0)
	ends := make([]dep, n)
	for nd := 0; nd < nodes; nd++ {
		var members []int
		for g := 0; g < per; g++ {
			members = append(members, nd*per+g)
		}
		e := ringPhase(a, members, 0, nodes, 0, true, make([]dep, per))
		for g, r := range members {
			ends[r] = e[g]
		}
	}
	for g := 0; g < per; g++ {
		var members []int
		var after []dep
		for nd := 0; nd < nodes; nd++ {
			members = append(members, nd*per+g)
			after = append(after, ends[nd*per+g])
		}
		group := mod(g+1, per) * nodes // the chunks this GPU owns after the node's reduce-scatter
		e := ringPhase(a, members, group, 1, 1, true, after)
		e = ringPhase(a, members, group, 1, 1, false, e)
		for nd, r := range members {
			ends[r] = e[nd]
		}
	}
	for nd := 0; nd < nodes; nd++ {
		var members []int
		var after []dep
		for g := 0; g < per; g++ {
			members = append(members, nd*per+g)
			after = append(after, ends[nd*per+g])
		}
		ringPhase(a, members, 0, nodes, 0, false, after)
	}
	return a
}

// twoStepAlltoall: GPUs in nodes of per; a chunk for another node goes first to the GPU of the
// sender's node with the destination's local index (into scratch), which then sends the chunks
// of all its node's GPUs for that destination in one message.
func twoStepAlltoall(nodes, per int) *xalgo {
	n := nodes * per
	a := newAlgo(fmt.Sprintf("two_step_alltoall_%dx%d", nodes, per), "alltoall", n, false, n, n, n)
	for r := 0; r < n; r++ {
		nd, g := r/per, r%per
		waits := map[int][]dep{} // per destination node: what its scratch rows wait for
		for lg := 0; lg < per; lg++ {
			if lg == g {
				continue
			}
			p := nd*per + lg
			t := a.tb(r, p, p, 0)
			for dn := 0; dn < nodes; dn++ {
				dst := dn*per + lg
				if dn == nd {
					t.add("s", 'i', dst, 'o', r, 1)
				} else {
					t.add("s", 'i', dst, 's', dn*per+g, 1)
				}
			}
			for dn := 0; dn < nodes; dn++ {
				if dn == nd {
					t.add("r", 'i', r, 'o', p, 1)
				} else {
					waits[dn] = append(waits[dn], t.add("r", 'i', dn*per+g, 's', dn*per+lg, 1))
				}
			}
		}
		loc := a.tb(r, -1, -1, 0)
		loc.add("cpy", 'i', r, 'o', r, 1)
		for dn := 0; dn < nodes; dn++ {
			if dn != nd {
				waits[dn] = append(waits[dn], loc.add("cpy", 'i', dn*per+g, 's', dn*per+g, 1))
			}
		}
		for dn := 0; dn < nodes; dn++ {
			if dn == nd {
				continue
			}
			p := dn*per + g
			t := a.tb(r, p, p, 0)
			t.add("s", 's', dn*per, 'o', nd*per, per, waits[dn]...)
			t.add("r", 's', nd*per, 'o', dn*per, per)
		}
	}
	return a
}

// ringReduceScatter: rank r sends block r-1, then receives, adds and forwards block r-k-1 at step
// k, and ends with block r reduced: in place into its input's block r, or into its one-block
// output.
func ringReduceScatter(n int, inplace bool) *xalgo {
	a := newAlgo(fmt.Sprintf("ring_reduce_scatter_%d_%s", n, placeName(inplace)), "reduce_scatter", n, inplace, n, 1, 0)
	for r := 0; r < n; r++ {
		t := a.tb(r, mod(r+1, n), mod(r-1, n), 0)
		t.add("s", 'i', mod(r-1, n), 'i', mod(r-1, n), 1)
		for k := 1; k < n-1; k++ {
			t.add("rrs", 'i', mod(r-k-1, n), 'i', mod(r-k-1, n), 1)
		}
		db, do := byte('o'), 0
		if inplace {
			db, do = 'i', r
		}
		t.add("rrc", 'i', r, db, do, 1)
	}
	return a
}

// ringAllgather: rank r sends its input, forwards what it receives (block r-k at step k) and
// ends with block r+1; out of place a local threadblock copies the rank's own input to its
// output's block r.
func ringAllgather(n int, inplace bool) *xalgo {
	a := newAlgo(fmt.Sprintf("ring_allgather_%d_%s", n, placeName(inplace)), "allgather", n, inplace, 1, n, 0)
	for r := 0; r < n; r++ {
		if !inplace {
			a.tb(r, -1, -1, 0).add("cpy", 'i', 0, 'o', r, 1)
		}
		t := a.tb(r, mod(r+1, n), mod(r-1, n), 0)
		t.add("s", 'i', 0, 'o', r, 1)
		for k := 1; k < n-1; k++ {
			t.add("rcs", 'o', mod(r-k, n), 'o', mod(r-k, n), 1)
		}
		t.add("r", 'o', mod(r+1, n), 'o', mod(r+1, n), 1)
	}
	return a
}

func placeName(inplace bool) string {
	if inplace {
		return "inplace"
	}
	return "outofplace"
}

// step finds GPU r's nth step (counting from 0) of type typ, in threadblock order.
func (a *xalgo) step(r int, typ string, nth int) (*xtb, int) {
	for _, t := range a.gpus[r].tbs {
		for j, s := range t.steps {
			if s.typ == typ {
				if nth == 0 {
					return t, j
				}
				nth--
			}
		}
	}
	panic(fmt.Sprintf("GPU %d has no %s step %d", r, typ, nth))
}

// drop removes step j of threadblock t of GPU r; dependencies on later steps of t follow them.
func (a *xalgo) drop(r int, t *xtb, j int) {
	t.steps = append(t.steps[:j], t.steps[j+1:]...)
	for _, u := range a.gpus[r].tbs {
		for _, s := range u.steps {
			for i := range s.deps {
				if d := &s.deps[i]; d.tb == t && d.step > j {
					d.step--
				}
			}
		}
	}
}
