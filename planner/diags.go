package planner

import (
	"strconv"
	"strings"

	"github.com/coredag/coredag/diag"
)

// phase orders diagnostics: only the first phase with errors is reported (DSL.md, Details).
type phase int

const (
	phaseNames  phase = iota // names, declarations and expressions
	phaseShapes              // bounds, lengths, types, access flags
	phaseMatch               // queue pairing and send/recv matching
	numPhases
)

// diags collects the diagnostics of one phase. The same mistake made by every rank of an SPMD
// text is one diagnostic that lists the ranks, not one per rank (diag.Group).
type diags struct{ diag.Group }

// list returns the phase's diagnostics for a plan of the given number of ranks, sorted.
func (d *diags) list(ranks int) diag.List {
	l := d.Group.List(ranks)
	l.Sort()
	return l
}

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
