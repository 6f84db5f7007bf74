package diag

import (
	"fmt"
	"slices"
	"strings"
)

// Code names the family of a diagnostic: what kind of mistake it is, independently of the
// wording of its message. Codes are stable: tools may match on them, so a code is never renamed
// or reused for another family; new families get new codes.
type Code string

// The codes of coredag's diagnostics. The first eleven are the families of docs/language.md
// (section Diagnostics); then come reading and running a plan, and coredag's own bugs.
const (
	Syntax   Code = "syntax"   // the text does not follow the grammar or the lexical rules
	Name     Code = "name"     // undefined, duplicate or misplaced names and declarations, -p
	Expr     Code = "expr"     // an expression cannot be evaluated: division by zero, overflow, undefined
	Shape    Code = "shape"    // types, bounds, lengths and shapes of buffers and slices
	Access   Code = "access"   // a remote op on a buffer without the access flag it needs
	Match    Code = "match"    // queue pairing and send/recv matching
	Cycle    Code = "cycle"    // a cycle of `after` edges
	Deadlock Code = "deadlock" // a loop of waits through queue order and message matching
	Race     Code = "race"     // two unordered accesses to the same memory, one of them a write
	Expect   Code = "expect"   // the plan does not compute what an `expect` statement says
	Assert   Code = "assert"   // an assert statement does not hold: the parameter set is refused
	Limit    Code = "limit"    // the plan exceeds a limit of coredag (ops, iterations, memory budget)
	Target   Code = "target"   // the plan exceeds a limit of the target it is compiled for
	RNR      Code = "rnr"      // (a warning) a message can arrive before its receive is posted
	Input    Code = "input"    // the file cannot be read
	Fault    Code = "fault"    // an op failed at run time
	Hang     Code = "hang"     // a run stopped making progress
	Internal Code = "internal" // coredag broke its own rules (a compiled plan that does not enforce its graph): a bug to report
)

// Related is another place a diagnostic is about: the other access of a race, the first
// declaration of a duplicate, one step of a cycle. Label says what is there.
type Related struct {
	Pos   Pos
	Label string
}

// Fix is a suggested correction: Msg says it in words (the diagnostic's message usually says
// it too); Edits, when the fix is a plain text change, apply it.
type Fix struct {
	Msg   string
	Edits []Edit
}

// Edit replaces the text from Pos up to End (exclusive, on the same file) with New.
type Edit struct {
	Pos, End Pos
	New      string
}

// Diagnostic is one finding about a plan: what is wrong (Msg) and where (Pos), with the other
// places it involves (Related), a suggested Fix, and for the mistakes of an SPMD plan the ranks
// it occurs on.
//
// Ranks are the ranks Msg is worded for, and Likewise the other ranks where the same check
// failed at the same positions, with their own figures. Both are empty when the diagnostic is
// not about particular ranks or holds alike on every rank. Group fills them in.
type Diagnostic struct {
	Code     Code
	Pos      Pos
	Msg      string
	Related  []Related
	Fix      *Fix
	Ranks    []int
	Likewise []int
}

// Errorf makes a diagnostic with a formatted message.
func Errorf(code Code, pos Pos, format string, args ...any) *Diagnostic {
	return &Diagnostic{Code: code, Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// Text is the message as printed: Msg followed by the ranks, "(on rank 0; likewise on ranks
// 1-7)", when it is about some ranks only.
func (d *Diagnostic) Text() string {
	switch {
	case len(d.Ranks) == 0:
		return d.Msg
	case len(d.Likewise) == 0:
		return d.Msg + " (on " + FormatRanks(d.Ranks) + ")"
	}
	return d.Msg + " (on " + FormatRanks(d.Ranks) + "; likewise on " + FormatRanks(d.Likewise) + ")"
}

// Error is the first line of the printed diagnostic: "file:line:col: message".
func (d *Diagnostic) Error() string { return d.Pos.String() + ": " + d.Text() }

// AllRanks returns Ranks and Likewise together, sorted, each rank once.
func (d *Diagnostic) AllRanks() []int {
	if len(d.Likewise) == 0 {
		return d.Ranks
	}
	return uniqueSorted(append(slices.Clone(d.Ranks), d.Likewise...))
}

// Relate adds a related position and returns d.
func (d *Diagnostic) Relate(pos Pos, label string) *Diagnostic {
	d.Related = append(d.Related, Related{Pos: pos, Label: label})
	return d
}

// compare orders diagnostics by position, then code, message and related positions; the
// diagnostic that ends a list cut at MaxErrors comes after all the others.
func compare(a, b *Diagnostic) int {
	if ta, tb := a.isTooMany(), b.isTooMany(); ta != tb {
		if ta {
			return 1
		}
		return -1
	}
	if c := a.Pos.Compare(b.Pos); c != 0 {
		return c
	}
	if c := strings.Compare(string(a.Code), string(b.Code)); c != 0 {
		return c
	}
	if c := strings.Compare(a.Text(), b.Text()); c != 0 {
		return c
	}
	return slices.CompareFunc(a.Related, b.Related, func(x, y Related) int {
		if c := x.Pos.Compare(y.Pos); c != 0 {
			return c
		}
		return strings.Compare(x.Label, y.Label)
	})
}

// List is the diagnostics of one phase. It implements error; Sort orders it by position and
// removes duplicates before it is reported.
type List []*Diagnostic

// Add appends a diagnostic with a formatted message and returns it, so related positions can be
// added.
func (l *List) Add(code Code, pos Pos, format string, args ...any) *Diagnostic {
	d := Errorf(code, pos, format, args...)
	*l = append(*l, d)
	return d
}

// MaxErrors is how many diagnostics a phase that reads untrusted text (the .dag lexer, the
// MSCCL XML reader and its checks) reports before it stops: past it, the rest are mostly
// consequences of the first ones, and a hostile file could otherwise cost one diagnostic per
// byte. It is the cap the replay check (planner/replay) has for its own diagnostics.
const MaxErrors = 50

// tooManyMsg is the message of the diagnostic that ends a list cut at MaxErrors.
var tooManyMsg = fmt.Sprintf("too many errors: stopped after the first %d", MaxErrors)

func (d *Diagnostic) isTooMany() bool { return d.Code == Limit && d.Msg == tooManyMsg }

// AddCapped is Add for a phase that stops at MaxErrors diagnostics. While l holds fewer, it adds
// the diagnostic and returns it and true. At MaxErrors it adds instead one last diagnostic, "too
// many errors", at pos (where the phase stops), and returns false: the caller stops there. Past
// that it adds nothing and returns false. When it returns false, the *Diagnostic it returns is in
// no list, so a Relate on it is harmless.
func (l *List) AddCapped(code Code, pos Pos, format string, args ...any) (*Diagnostic, bool) {
	switch {
	case len(*l) < MaxErrors:
		return l.Add(code, pos, format, args...), true
	case !l.Capped():
		*l = append(*l, &Diagnostic{Code: Limit, Pos: pos, Msg: tooManyMsg})
	}
	return &Diagnostic{Code: code, Pos: pos}, false
}

// Capped reports whether l ends with the "too many errors" diagnostic of AddCapped: the phase
// that filled it stopped before the end of its input. Sort keeps that diagnostic last.
func (l List) Capped() bool { return len(l) > 0 && l[len(l)-1].isTooMany() }

// Sort sorts the list by position (then code, message and related positions) and removes
// exact duplicates.
func (l *List) Sort() {
	slices.SortStableFunc(*l, compare)
	*l = slices.CompactFunc(*l, func(a, b *Diagnostic) bool { return compare(a, b) == 0 })
}

// Error is the first diagnostic, and how many more there are.
func (l List) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	return fmt.Sprintf("%s (and %d more errors)", l[0].Error(), len(l)-1)
}

// Err returns nil for an empty list and the list itself otherwise.
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// FormatRanks writes a set of ranks compactly: "rank 3", "ranks 0-7", "ranks 0, 2, 4-6". It
// sorts a copy of ranks and lists each rank once.
func FormatRanks(ranks []int) string {
	rs := uniqueSorted(slices.Clone(ranks))
	switch len(rs) {
	case 0:
		return "no rank"
	case 1:
		return fmt.Sprintf("rank %d", rs[0])
	}
	var b strings.Builder
	b.WriteString("ranks ")
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteString(", ")
		}
		switch {
		case j == i:
			fmt.Fprint(&b, rs[i])
		case j == i+1:
			fmt.Fprintf(&b, "%d, %d", rs[i], rs[j])
		default:
			fmt.Fprintf(&b, "%d-%d", rs[i], rs[j])
		}
		i = j + 1
	}
	return b.String()
}

func uniqueSorted(rs []int) []int {
	slices.Sort(rs)
	return slices.Compact(rs)
}
