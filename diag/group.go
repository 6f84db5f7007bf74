package diag

import (
	"strconv"
	"strings"
)

// Group merges the instances of one mistake made on several ranks of an SPMD plan into one
// diagnostic. The plan is one text for every rank, so a mistake in it is usually made by many
// ranks, each with its own figures ("rank 1's queue" on rank 0, "rank 2's queue" on rank 1).
//
// Instances are the same mistake when they have the same code, position, related positions
// and kind: the check that failed, independently of the figures (usually the format string of
// the message). The merged diagnostic is the first instance, worded for its ranks (Ranks); the
// ranks of the other instances are its Likewise.
//
// The zero Group is empty and ready to use.
type Group struct {
	order []*group
	index map[groupKey]*group
}

type groupKey struct {
	code    Code
	pos     Pos
	kind    string
	related string // the related positions, encoded
}

type group struct {
	first    *Diagnostic
	msg      string // first's message when it was added
	own      []int  // ranks of the instances with that message
	others   []int  // ranks of the other instances
	noRank   bool   // the first instance is not about a rank
	lastOwn  int    // the last rank appended to own, to skip repeats cheaply
	lastElse int
}

// Add records one instance of a mistake, found on ranks (none: not about particular ranks).
// kind identifies the check that failed (see Group). Add reports whether d is the first
// instance of its mistake: the diagnostic List returns for it, which the caller may still
// complete (with a hint that is costly to compute, say). The others are compared with it by
// the message it had when it was added, then dropped.
func (g *Group) Add(d *Diagnostic, kind string, ranks ...int) (first bool) {
	k := groupKey{code: d.Code, pos: d.Pos, kind: kind, related: relatedKey(d.Related)}
	if g.index == nil {
		g.index = map[groupKey]*group{}
	}
	gr, ok := g.index[k]
	if !ok {
		gr = &group{first: d, msg: d.Msg, noRank: len(ranks) == 0, lastOwn: -1, lastElse: -1}
		g.index[k] = gr
		g.order = append(g.order, gr)
	}
	same := d.Msg == gr.msg
	for _, r := range ranks {
		switch {
		case same && r != gr.lastOwn:
			gr.own, gr.lastOwn = append(gr.own, r), r
		case !same && r != gr.lastElse:
			gr.others, gr.lastElse = append(gr.others, r), r
		}
	}
	return !ok
}

// AddLikewise records instances of d's mistake, already added, on ranks, with figures unlike
// its first instance's: for a check whose message names the rank, which need not word the
// instances on other ranks only to have them compared and dropped.
func (g *Group) AddLikewise(d *Diagnostic, kind string, ranks ...int) {
	gr := g.index[groupKey{code: d.Code, pos: d.Pos, kind: kind, related: relatedKey(d.Related)}]
	if gr == nil {
		panic("diag: AddLikewise before Add")
	}
	for _, r := range ranks {
		if r != gr.lastElse {
			gr.others, gr.lastElse = append(gr.others, r), r
		}
	}
}

// Len is the number of distinct mistakes recorded.
func (g *Group) Len() int { return len(g.order) }

// List returns one diagnostic per mistake, in the order they were first added, for a plan of
// nranks ranks. A mistake whose first instance is not about a rank, or that every rank makes
// with the same message, lists no ranks; otherwise Ranks lists the ranks with the first
// instance's message, and Likewise the others (never a rank of Ranks, possibly none).
func (g *Group) List(nranks int) List {
	out := make(List, 0, len(g.order))
	for _, gr := range g.order {
		d := *gr.first
		d.Ranks, d.Likewise = nil, nil
		own := uniqueSorted(gr.own)
		if !gr.noRank && len(own) > 0 && len(own) < nranks {
			d.Ranks = own
			in := make(map[int]bool, len(own))
			for _, r := range own {
				in[r] = true
			}
			for _, r := range uniqueSorted(gr.others) {
				if !in[r] {
					d.Likewise = append(d.Likewise, r)
				}
			}
		}
		out = append(out, &d)
	}
	return out
}

// relatedKey encodes the positions of related (not their labels, which may carry figures).
func relatedKey(related []Related) string {
	if len(related) == 0 {
		return ""
	}
	var b strings.Builder
	for _, r := range related {
		b.WriteString(strconv.FormatUint(uint64(r.Pos.File), 36))
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(uint64(r.Pos.Line), 36))
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(uint64(r.Pos.Col), 36))
		b.WriteByte(' ')
	}
	return b.String()
}
