// Package planset reads plan sets: small files that say which plan runs a collective at which
// message size and world size. A set names its collective, then one line per plan:
//
//	# allreduce on up to 64 ranks
//	collective allreduce
//	plan recursive_doubling_allreduce.dag sizes 0..16KiB   ranks 2..64
//	plan rabenseifner_allreduce.dag       sizes 16KiB..    ranks 2..64
//
// Sizes are half-open byte ranges, A..B meaning A <= size < B and A.. every size from A on;
// ranks are inclusive, R..S, R, or R.. for every world size from R on. `-p NAME=VALUE` after the
// ranges sets a param of that plan (repeatable). Paths are relative to the set's file. An
// optional `size-param NAME` line names the param that scales the plans' message size (n when
// there is none): opening a plan for a message size sets it, unless a line or the caller does.
//
// Load checks the set whole and reports every mistake at its position: a plan that does not
// load, or whose `expect` is not the set's collective (or that has none), two plans that serve
// the same size and world size (an overlap), and a size or world size within the set's range
// that no plan serves (a gap), each once for the world sizes in a row where it holds; at most
// the first 50 plans' mistakes, and the first 50 gaps and overlaps (each then how many more
// there are). Every world size from the least to the greatest a plan names must be served at
// every size from 0 on, so that Select never has to fall back silently.
package planset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/boundedio"
	"github.com/coredag/coredag/internal/intlit"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// Unbounded is the end of an open range (`16KiB..`, `2..`).
const Unbounded = math.MaxInt64

// Entry is one plan line of a set.
type Entry struct {
	Path string // the plan file, as written
	File string // the plan file, resolved against the set's directory
	// Sizes [SizeLo, SizeHi) in bytes and world sizes [RanksLo, RanksHi] (Unbounded: open).
	SizeLo, SizeHi   int64
	RanksLo, RanksHi int64
	Params           []string // -p NAME=VALUE, as written
	Pos              diag.Pos // the line's `plan` keyword
	SizePos          diag.Pos // its size range
	RanksPos         diag.Pos // its world size range
}

// Set is a loaded plan set.
type Set struct {
	File       string
	Collective ir.ExpectKind
	Pos        diag.Pos // the `collective` line
	SizeParam  string   // the param that scales the message size (`size-param`; default n)
	Entries    []Entry
}

// DefaultSizeParam is the size param of a set without a `size-param` line.
const DefaultSizeParam = "n"

// Checker loads a plan of the set at a world size and returns its postconditions: the caller's
// front end (planner.Load), so that this package does not depend on it. ranks is the least world
// size the entry serves; params are the entry's -p values. ctx is Check's: once it is cancelled,
// the Checker stops the plan and returns an error.
type Checker func(ctx context.Context, path string, ranks int64, params []string) ([]ir.Expect, error)

// firstStatement returns the words of src's first line that holds more than blanks and a
// comment, and that line's number; no words for a file of only those.
func firstStatement(src []byte) ([]token, int) {
	for n := 1; len(src) > 0; n++ {
		line, rest, _ := bytes.Cut(src, []byte{'\n'})
		if c := bytes.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		line = line[:min(len(line), 1<<10)] // the first words are all its callers read
		if toks := fields(strings.TrimSuffix(string(line), "\r")); len(toks) > 0 {
			return toks, n
		}
		src = rest
	}
	return nil, 0
}

// IsSet reports whether the file name, whose text is src, is a plan set: named .set, or
// beginning as a set does, with `collective`, `size-param` or `plan FILE sizes`, where a plan
// begins with `plan NAME` (docs/language.md). Commands and the library use it to refuse a set
// given as a plan with one error that says so.
func IsSet(name string, src []byte) bool {
	if strings.HasSuffix(name, ".set") {
		return true
	}
	toks, _ := firstStatement(src)
	if len(toks) == 0 {
		return false
	}
	switch toks[0].text {
	case "collective", "size-param":
		return true
	case "plan":
		return len(toks) >= 3 && toks[2].text == "sizes"
	}
	return false
}

// notASet is the one error of Parse for a plan or an MSCCL algorithm given as a set, rather
// than the set language's errors on every line; nil for anything else.
func notASet(file diag.FileID, src []byte) error {
	toks, line := firstStatement(src)
	what := ""
	switch {
	case len(toks) == 2 && toks[0].text == "plan" && isIdent(toks[1].text):
		what = "a plan (`plan " + toks[1].text + "`)"
	case len(toks) > 0 && strings.HasPrefix(toks[0].text, "<"):
		what = "an MSCCL algorithm (XML)"
	default:
		return nil
	}
	var errs diag.List
	errs.Add(diag.Syntax, diag.Pos{File: file, Line: uint32(line), Col: uint32(toks[0].col)},
		"this is %s, not a plan set: a set begins with `collective NAME` and names its plans in `plan FILE sizes A..B ranks R..` lines", what)
	return errs.Err()
}

// Parse reads a set's text. Errors are a diag.List with positions in name.
func Parse(name string, src []byte) (*Set, error) {
	s := &Set{File: name, SizeParam: DefaultSizeParam}
	file := diag.File(name)
	if err := notASet(file, src); err != nil {
		return nil, err
	}
	var errs diag.List
	haveColl, haveSize := false, false
	collLines, planLines := 0, 0
	for i, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		toks := fields(line)
		if len(toks) == 0 {
			continue
		}
		pos := func(t token) diag.Pos { return diag.Pos{File: file, Line: uint32(i + 1), Col: uint32(t.col)} }
		switch toks[0].text {
		case "collective":
			collLines++
			if haveColl {
				errs.Add(diag.Syntax, pos(toks[0]), "a second `collective` line: a set serves one collective")
				continue
			}
			if len(toks) != 2 {
				errs.Add(diag.Syntax, pos(toks[0]), "write `collective NAME`, NAME one of %s", strings.Join(ir.ExpectKinds(), ", "))
				continue
			}
			k, ok := ir.ParseExpectKind(toks[1].text)
			if !ok || k == ir.ExpectUnchanged {
				errs.Add(diag.Syntax, pos(toks[1]), "unknown collective %q: one of %s", toks[1].text, strings.Join(slices.DeleteFunc(ir.ExpectKinds(), func(s string) bool { return s == "unchanged" }), ", "))
				continue
			}
			s.Collective, s.Pos, haveColl = k, pos(toks[0]), true
		case "size-param":
			switch {
			case haveSize:
				errs.Add(diag.Syntax, pos(toks[0]), "a second `size-param` line: a set's plans scale along one param")
			case len(toks) != 2 || !isIdent(toks[1].text):
				errs.Add(diag.Syntax, pos(toks[0]), "write `size-param NAME`, NAME the param that scales the message size")
			case toks[1].text == "ranks":
				errs.Add(diag.Syntax, pos(toks[1]), "ranks is the world size, not a message size param")
			default:
				s.SizeParam, haveSize = toks[1].text, true
			}
		case "plan":
			planLines++
			e, err := parseEntry(toks, pos)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			e.File = e.Path
			if !filepath.IsAbs(e.Path) {
				e.File = filepath.Join(filepath.Dir(name), e.Path)
			}
			s.Entries = append(s.Entries, e)
		default:
			errs.Add(diag.Syntax, pos(toks[0]), "unknown statement %q: a set has a `collective` line, `plan` lines and at most one `size-param` line", toks[0].text)
		}
	}
	if collLines == 0 {
		errs.Add(diag.Syntax, diag.Pos{File: file, Line: 1, Col: 1}, "the set has no `collective NAME` line")
	}
	if planLines == 0 && haveColl {
		errs.Add(diag.Syntax, s.Pos, "the set lists no plan")
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// isIdent reports whether s is a param name: a letter or _, then letters, digits or _.
func isIdent(s string) bool {
	for i, r := range s {
		if r != '_' && !unicode.IsLetter(r) && (i == 0 || !unicode.IsDigit(r)) {
			return false
		}
	}
	return s != ""
}

type token struct {
	text string
	col  int // 1-based byte column
}

func fields(line string) []token {
	var out []token
	i := 0
	for i < len(line) {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		if j > i {
			out = append(out, token{line[i:j], i + 1})
		}
		i = j
	}
	return out
}

// NestedSet says that path, named by a set's line as a plan, is a plan set.
func NestedSet(path string) string {
	return path + " is a plan set, not a plan: a set's lines name plan files, and sets do not nest"
}

func parseEntry(toks []token, pos func(token) diag.Pos) (Entry, *diag.Diagnostic) {
	e := Entry{Pos: pos(toks[0])}
	if len(toks) < 2 {
		return e, diag.Errorf(diag.Syntax, pos(toks[0]), "write `plan FILE sizes A..B ranks R..S [-p NAME=VALUE ...]`")
	}
	e.Path = toks[1].text
	if strings.HasSuffix(e.Path, ".set") { // IsSet's rule by name; the checker reads the others
		return e, diag.Errorf(diag.Syntax, pos(toks[1]), "%s", NestedSet(e.Path))
	}
	var haveSizes, haveRanks bool
	var given map[string]string // the -p values by name
	for k := 2; k < len(toks); k++ {
		t := toks[k]
		if k+1 >= len(toks) {
			return e, diag.Errorf(diag.Syntax, pos(t), "%q needs a value after it", t.text)
		}
		v := toks[k+1]
		k++
		var err error
		switch t.text {
		case "sizes":
			e.SizeLo, e.SizeHi, err = parseRange(v.text, true)
			e.SizePos, haveSizes = pos(v), true
		case "ranks":
			e.RanksLo, e.RanksHi, err = parseRange(v.text, false)
			e.RanksPos, haveRanks = pos(v), true
			if err == nil && e.RanksLo < 1 {
				err = errors.New("a world size is at least 1")
			}
		case "-p":
			// the checker parses the params again (planner.SetPlanExpects): what it would refuse
			// is refused here, at the param, rather than at the line as the plan's error
			name, val, ok := strings.Cut(v.text, "=")
			switch {
			case !ok || name == "" || val == "":
				err = errors.New("write -p NAME=VALUE")
			case name == "ranks":
				err = errors.New("the line's `ranks` gives the world size; the plan gets it from there")
			case given[name] != "":
				err = fmt.Errorf("%s is given twice on the line (%s=%s before)", name, name, given[name])
			default:
				if _, perr := intlit.Parse(val); perr != nil { // at the value, after NAME=
					return e, diag.Errorf(diag.Syntax, pos(token{val, v.col + len(name) + 1}), "%s %q: %v", t.text, v.text, perr)
				}
			}
			if given == nil {
				given = map[string]string{}
			}
			given[name] = val
			e.Params = append(e.Params, v.text)
		default:
			return e, diag.Errorf(diag.Syntax, pos(t), "unknown word %q: a plan line takes sizes, ranks and -p", t.text)
		}
		if err != nil {
			return e, diag.Errorf(diag.Syntax, pos(v), "%s %q: %v", t.text, v.text, err)
		}
	}
	if !haveSizes {
		return e, diag.Errorf(diag.Syntax, pos(toks[0]), "the plan line has no `sizes A..B`")
	}
	if !haveRanks {
		return e, diag.Errorf(diag.Syntax, pos(toks[0]), "the plan line has no `ranks R..S`")
	}
	return e, nil
}

// parseRange reads A..B, A.. or (for world sizes) R. Sizes are half-open, world sizes inclusive.
func parseRange(s string, sizes bool) (lo, hi int64, err error) {
	a, b, isRange := strings.Cut(s, "..")
	parse := ParseSize
	if !sizes {
		parse = parseRanks
	}
	if lo, err = parse(a); err != nil {
		return 0, 0, err
	}
	switch {
	case !isRange && sizes:
		return 0, 0, errors.New("write a range A..B (A <= size < B) or A.. (every size from A)")
	case !isRange:
		return lo, lo, nil
	case b == "":
		return lo, Unbounded, nil
	}
	if hi, err = parse(b); err != nil {
		return 0, 0, err
	}
	if sizes && hi <= lo {
		return 0, 0, fmt.Errorf("the range is empty: it ends at or below its start")
	}
	if !sizes && hi < lo {
		return 0, 0, fmt.Errorf("the range is empty: it ends below its start")
	}
	return lo, hi, nil
}

// parseRanks reads a world size: a plain number.
func parseRanks(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("not a world size (write a number of ranks, such as 4)")
	}
	return n, nil
}

// ParseSize reads a byte count: 4096, 64KiB, 16MiB, 8B.
func ParseSize(s string) (int64, error) {
	x := strings.TrimSpace(s)
	if !strings.HasSuffix(x, "iB") {
		x = strings.TrimSuffix(x, "B")
	}
	if x == "" {
		return 0, errors.New("empty number")
	}
	n, err := intlit.Parse(x)
	if err != nil {
		return 0, fmt.Errorf("not a size (write 4096, 64KiB or 16MiB)")
	}
	if n < 0 {
		return 0, errors.New("negative")
	}
	return n, nil
}

// Check verifies the set: every plan's expect is the set's collective (through check), and the
// entries cover every size from 0 on, for every world size from the least to the greatest
// named, exactly once. Every mistake is reported, at its position, up to maxPlans plans'
// and maxCoverage gaps and overlaps. Once ctx is cancelled, Check stops, between two plans
// (check, given ctx, stops its plan) or within the coverage's sweep of the world sizes, and
// returns ctx's cause (context.Cause).
func (s *Set) Check(ctx context.Context, check Checker) error {
	var errs diag.List
	// The plans with a mistake, and the line of the first one left out: report says whether
	// a plan's mistake is worded, one of the first maxPlans.
	failed, first := 0, diag.Pos{}
	report := func(pos diag.Pos) bool {
		if failed++; failed == maxPlans+1 {
			first = pos
		}
		return failed <= maxPlans
	}
	for _, e := range s.Entries {
		if check == nil {
			break
		}
		if err := stop.Cause(ctx); err != nil {
			return err
		}
		exps, err := check(ctx, e.File, e.RanksLo, e.Params)
		if cause := stop.Stopped(ctx, err); cause != nil { // the plan was stopped: what check says of it means nothing
			return cause
		}
		if err != nil {
			if report(e.Pos) {
				d := errs.Add(diag.Input, e.Pos, "plan %s at ranks=%d: %s", e.Path, e.RanksLo, firstLine(err.Error()))
				d.Related = append(d.Related, diag.Related{Pos: e.RanksPos, Label: "the least world size it serves"})
			}
			continue
		}
		if len(exps) == 0 {
			if report(e.Pos) {
				errs.Add(diag.Expect, e.Pos, "plan %s has no `expect`: a set's plans must say they compute its collective (%s)", e.Path, s.Collective)
			}
			continue
		}
		if k := exps[0].Kind; k != s.Collective && report(e.Pos) {
			d := errs.Add(diag.Expect, e.Pos, "plan %s computes %s (its expect), not the set's collective %s", e.Path, k, s.Collective)
			d.Related = append(d.Related, diag.Related{Pos: exps[0].Pos, Label: "its expect"}, diag.Related{Pos: s.Pos, Label: "the set's collective"})
		}
	}
	if failed > maxPlans {
		errs.Add(diag.Limit, first, "and %d more plans with errors, the first of them here: a set's check reports at most %d", failed-maxPlans, maxPlans)
	}
	cov, err := s.coverage(ctx)
	if err != nil {
		return err
	}
	errs = append(errs, cov...)
	return errs.Err()
}

// maxPlans is the most plans whose mistake Check reports (each has one: it does not load, has no
// expect, or another collective's); one more diagnostic says how many it left out. A set copied
// without its plans, or read from the wrong directory, would otherwise report every line.
const maxPlans = diag.MaxErrors

// maxCoverage is the most gaps and overlaps coverage reports; one more diagnostic says how many
// it left out. A set whose lines each start one world size after the last can hold thousands,
// and the first few say what is wrong.
const maxCoverage = diag.MaxErrors

// A finding is a gap or an overlap that coverage sees at a world size, named by the entries it
// is about, which fix its sizes: the sizes of a gap run from the end of entry last's (0 when last
// is -1) to the start of entry i's, an overlap's from the start of i's to the nearer end of the
// two, a trailing gap's from the end of last's on. The same finding at consecutive world sizes
// is reported once, for all of them.
type finding struct {
	kind    int // one of the gap and overlap kinds below
	i, last int
}

const (
	rankGap = iota // no entry serves the world sizes (i: the entry that starts after them)
	sizeGap
	overlap
	tailGap
)

// coverage reports overlaps and gaps of the entries' ranges: each once for the world sizes in a
// row at which it is seen, at most maxCoverage of them. It sweeps the world sizes where the
// entries serving them change, walking the entries that serve each in size order, so ctx is
// looked at before each: the error is its cause once it is cancelled.
func (s *Set) coverage(ctx context.Context) (diag.List, error) {
	var errs diag.List
	n := len(s.Entries)
	// the world sizes where the set of entries serving them can change
	cuts := []int64{}
	for _, e := range s.Entries {
		cuts = append(cuts, e.RanksLo)
		if e.RanksHi != Unbounded {
			cuts = append(cuts, e.RanksHi+1)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	maxR := int64(0)
	for _, e := range s.Entries {
		maxR = max(maxR, e.RanksHi)
	}
	// the entries in size order (then line order): a world size's sweep walks them so
	bySize := make([]int, n)
	for i := range bySize {
		bySize[i] = i
	}
	slices.SortStableFunc(bySize, func(a, b int) int { return cmpInt(s.Entries[a].SizeLo, s.Entries[b].SizeLo) })
	rank := make([]int, n) // rank[i]: entry i's place in bySize
	for k, i := range bySize {
		rank[i] = k
	}
	// the entries in the order they start serving, for the sweep to add them
	byLo := slices.Clone(bySize)
	slices.SortStableFunc(byLo, func(a, b int) int {
		if c := cmpInt(s.Entries[a].RanksLo, s.Entries[b].RanksLo); c != 0 {
			return c
		}
		return a - b
	})
	// and in the order they stop serving, for the sweep to drop them
	byHi := slices.Clone(bySize)
	slices.SortFunc(byHi, func(a, b int) int { return cmpInt(s.Entries[a].RanksHi, s.Entries[b].RanksHi) })

	// A finding seen again at the next cut is found in the slot of its entry (the tail gap's and
	// the world sizes' gap in slots of their own), so that no map is consulted for each entry at
	// each world size. Only the first maxCoverage findings are worded, once the sweep is over.
	type run struct {
		f  finding
		ci int // the last cut it was seen at
		at int // its index in shown; -1 past maxCoverage
	}
	type report struct {
		f      finding
		lo, hi int64 // the world sizes it is seen at
		d      *diag.Diagnostic
	}
	var shown []report
	found, first := 0, diag.Pos{} // how many findings; where the first one left out is
	slots := make([]run, n+2)     // entry i's, the tail gap's (n), the world sizes' gap (n+1)
	for k := range slots {
		slots[k].ci = -2
	}
	see := func(slot *run, f finding, ci int, r, hi int64, pos diag.Pos) *diag.Diagnostic {
		if slot.ci == ci-1 && slot.f == f {
			slot.ci = ci
			if slot.at >= 0 {
				shown[slot.at].hi = hi
			}
			return nil
		}
		*slot = run{f: f, ci: ci, at: -1}
		found++
		switch {
		case found <= maxCoverage:
			slot.at = len(shown)
			shown = append(shown, report{f: f, lo: r, hi: hi, d: errs.Add(diag.Shape, pos, "")})
			return shown[slot.at].d
		case found == maxCoverage+1:
			first = pos
		}
		return nil
	}
	var active, added []int // entries serving the world size, in size order
	p, q := 0, 0            // byLo[p:] have not started serving, byHi[q:] have not stopped
	for ci, r := range cuts {
		if r > maxR {
			break
		}
		if err := stop.Cause(ctx); err != nil {
			return nil, err
		}
		hi := int64(Unbounded)
		if ci+1 < len(cuts) {
			hi = cuts[ci+1] - 1
		}
		if q < n && s.Entries[byHi[q]].RanksHi < r { // some stop serving: one pass drops them all
			for q < n && s.Entries[byHi[q]].RanksHi < r {
				q++
			}
			active = slices.DeleteFunc(active, func(i int) bool { return s.Entries[i].RanksHi < r })
		}
		added = added[:0]
		for ; p < n && s.Entries[byLo[p]].RanksLo <= r; p++ {
			if s.Entries[byLo[p]].RanksHi >= r {
				added = append(added, byLo[p])
			}
		}
		if len(added) > 0 {
			slices.SortFunc(added, func(a, b int) int { return rank[a] - rank[b] })
			active = mergeBy(active, added, rank)
		}
		if len(active) == 0 {
			// between two entries' world sizes: report at the entry that starts after the gap
			see(&slots[n+1], finding{rankGap, byLo[p], -1}, ci, r, hi, s.Entries[byLo[p]].RanksPos)
		}
		end := int64(0)
		last := -1
		for _, i := range active {
			e := &s.Entries[i]
			switch {
			case e.SizeLo > end:
				if d := see(&slots[i], finding{sizeGap, i, last}, ci, r, hi, e.SizePos); d != nil && last >= 0 {
					d.Related = append(d.Related, diag.Related{Pos: s.Entries[last].SizePos, Label: "the sizes below the gap end here"})
				}
			case e.SizeLo < end:
				if d := see(&slots[i], finding{overlap, i, last}, ci, r, hi, e.SizePos); d != nil {
					d.Related = append(d.Related, diag.Related{Pos: s.Entries[last].SizePos, Label: "the other plan serving them"})
				}
			}
			if e.SizeHi > end {
				end, last = e.SizeHi, i
			}
		}
		if last >= 0 && end != Unbounded {
			see(&slots[n], finding{tailGap, last, last}, ci, r, hi, s.Entries[last].SizePos)
		}
	}
	for _, x := range shown {
		what := fmt.Sprintf("ranks %s", rangeText(x.lo, x.hi))
		end := int64(0)
		if x.f.last >= 0 {
			end = s.Entries[x.f.last].SizeHi
		}
		e := &s.Entries[x.f.i]
		switch x.f.kind {
		case rankGap:
			x.d.Msg = fmt.Sprintf("a gap: no plan serves %s (at any size)", what)
		case sizeGap:
			x.d.Msg = fmt.Sprintf("a gap: no plan serves sizes %s at %s", sizeRangeText(end, e.SizeLo), what)
		case overlap:
			x.d.Msg = fmt.Sprintf("an overlap: sizes %s at %s are served by two plans", sizeRangeText(e.SizeLo, min(end, e.SizeHi)), what)
		case tailGap:
			x.d.Msg = fmt.Sprintf("a gap: no plan serves sizes from %s on at %s (end the last range with `..`)", formatSize(end), what)
		}
	}
	if found > maxCoverage {
		errs.Add(diag.Limit, first, "and %d more gaps and overlaps, the first of them here: a set's check reports at most %d", found-maxCoverage, maxCoverage)
	}
	return errs, nil
}

// mergeBy merges b into a, both sorted by key, and returns the result (in a's array when it
// has room).
func mergeBy(a, b []int, key []int) []int {
	out := slices.Grow(a, len(b))[:len(a)+len(b)]
	i, j := len(a)-1, len(b)-1
	for k := len(out) - 1; j >= 0; k-- {
		if i >= 0 && key[a[i]] > key[b[j]] {
			out[k] = a[i]
			i--
		} else {
			out[k] = b[j]
			j--
		}
	}
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func rangeText(lo, hi int64) string {
	switch {
	case hi == Unbounded:
		return fmt.Sprintf("%d and up", lo)
	case lo == hi:
		return strconv.FormatInt(lo, 10)
	}
	return fmt.Sprintf("%d..%d", lo, hi)
}

func sizeRangeText(lo, hi int64) string {
	if hi == Unbounded {
		return formatSize(lo) + ".."
	}
	return formatSize(lo) + ".." + formatSize(hi)
}

// formatSize writes a byte count as the set's syntax does: 64KiB, 1MiB, 1000.
func formatSize(n int64) string {
	for _, u := range []struct {
		s string
		v int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.v && n%u.v == 0 {
			return fmt.Sprintf("%d%s", n/u.v, u.s)
		}
	}
	return strconv.FormatInt(n, 10)
}

// FormatSize writes a byte count as a set's file writes it (64KiB, 1000).
func FormatSize(n int64) string { return formatSize(n) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// MaxSize is the largest set file Load reads: a set is a few lines.
const MaxSize = 1 << 20

// Load reads, parses and checks a set file; ctx stops the check (Set.Check).
func Load(ctx context.Context, path string, check Checker) (*Set, []byte, error) {
	src, err := boundedio.ReadFile(path, MaxSize)
	var big *boundedio.TooLargeError
	switch {
	case errors.As(err, &big):
		return nil, nil, fmt.Errorf("%s: %w: a plan set may be at most %s", path, err, big.LimitText())
	case err != nil:
		return nil, nil, err
	}
	s, err := Parse(path, src)
	if err != nil {
		return nil, src, err
	}
	return s, src, s.Check(ctx, check)
}

// Choice is the plan Select picked, and why.
type Choice struct {
	Entry *Entry
	Why   string
}

// Select returns the entry that serves a message of size bytes on ranks ranks, and why; an
// error when none does (a world size outside the set's, a negative size).
func (s *Set) Select(size, ranks int64) (Choice, error) {
	if size < 0 {
		return Choice{}, fmt.Errorf("a message of %d bytes: sizes are 0 and up", size)
	}
	for i := range s.Entries {
		e := &s.Entries[i]
		if e.SizeLo <= size && (size < e.SizeHi || e.SizeHi == Unbounded) && e.RanksLo <= ranks && ranks <= e.RanksHi {
			why := fmt.Sprintf("%s:%d: size %s is in %s and ranks %d in %s", e.Pos.File.Name(), e.Pos.Line,
				formatSize(size), sizeRangeText(e.SizeLo, e.SizeHi), ranks, rangeText(e.RanksLo, e.RanksHi))
			return Choice{Entry: e, Why: why}, nil
		}
	}
	lo, hi := int64(Unbounded), int64(0)
	for _, e := range s.Entries {
		lo, hi = min(lo, e.RanksLo), max(hi, e.RanksHi)
	}
	return Choice{}, fmt.Errorf("no plan of %s serves ranks %d: the set serves ranks %s", s.File, ranks, rangeText(lo, hi))
}
