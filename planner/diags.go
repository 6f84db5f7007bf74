package planner

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/coredag/coredag/dsl"
)

// phase orders diagnostics: only the first phase with errors is reported (DSL.md, Details).
type phase int

const (
	phaseNames  phase = iota // names, declarations and expressions
	phaseShapes              // bounds, lengths, types, access flags
	phaseMatch               // queue pairing and send/recv matching
	numPhases
)

// diags collects diagnostics of one phase. The same mistake made by every rank of an SPMD
// text is one diagnostic that lists the ranks, not one per rank.
type diags struct {
	order []diagKey
	ranks map[diagKey][]int
}

type diagKey struct {
	pos dsl.Pos
	msg string
}

func (d *diags) add(pos dsl.Pos, rank int, format string, args ...any) {
	k := diagKey{pos, fmt.Sprintf(format, args...)}
	if d.ranks == nil {
		d.ranks = map[diagKey][]int{}
	}
	rs, seen := d.ranks[k]
	if !seen {
		d.order = append(d.order, k)
	}
	if rank >= 0 && (len(rs) == 0 || rs[len(rs)-1] != rank) {
		rs = append(rs, rank)
	}
	d.ranks[k] = rs
}

func (d *diags) list(ranks int) dsl.ErrorList {
	// Ranks often make the same mistake with different numbers in it ("rank 1's queue" on rank
	// 0, "rank 2's queue" on rank 1): such messages at one position are one diagnostic, worded
	// for the first rank, that lists the others.
	type group struct {
		first diagKey
		ranks []int
	}
	var order []diagKey
	groups := map[diagKey]*group{}
	for _, k := range d.order {
		shape := diagKey{k.pos, digits.ReplaceAllString(k.msg, "#")}
		gr, ok := groups[shape]
		if !ok {
			gr = &group{first: k}
			groups[shape] = gr
			order = append(order, shape)
		}
		gr.ranks = append(gr.ranks, d.ranks[k]...)
	}
	var l dsl.ErrorList
	for _, shape := range order {
		gr := groups[shape]
		msg, own := gr.first.msg, d.ranks[gr.first]
		// The ranks the other messages of the group add to the first one's. One rank may make
		// the mistake several times with different numbers (in a loop), so the group may list a
		// rank more than once, and add none.
		seen := make(map[int]bool, len(own))
		for _, r := range own {
			seen[r] = true
		}
		var rest []int
		for _, r := range gr.ranks {
			if !seen[r] {
				seen[r] = true
				rest = append(rest, r)
			}
		}
		switch {
		case len(own) == 0 || len(own) == ranks: // not rank-specific, or every rank alike
		case len(rest) == 0:
			msg += " (on " + formatRanks(own) + ")"
		default:
			msg += " (on " + formatRanks(own) + "; likewise on " + formatRanks(rest) + ")"
		}
		l = append(l, &dsl.Error{Pos: shape.pos, Msg: msg})
	}
	l.Sort()
	return l
}

// digits matches the numbers in a message, which differ between ranks making one mistake.
var digits = regexp.MustCompile(`[0-9]+`)

// Plural formats a count with its noun for messages: "1 recv", "3 recvs", "2 entries",
// "2 mismatches".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	switch l := len(noun); {
	case l > 1 && noun[l-1] == 'y' && !strings.ContainsRune("aeiou", rune(noun[l-2])):
		noun = noun[:l-1] + "ies"
	case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"), strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "sh"):
		noun += "es"
	default:
		noun += "s"
	}
	return strconv.Itoa(n) + " " + noun
}
