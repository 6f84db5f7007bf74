package planner_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
)

// The mutation test of postconditions (issue 16): every plan in plans/ that states what it
// computes is mutated in the text, one mutation at a time, and each mutant is checked as
// `coredag check` does (planner.Load) at world sizes 2, 3, 4 and 8 (those the plan takes):
//
//   - delete an op: its operation becomes `nop` (so references to it stay valid);
//   - shift one slice of an op by one chunk (its own length), wrapping around the buffer:
//     buf[lo:hi] becomes buf[(lo + L) % C : (lo + L) % C + L], buf[i] becomes buf[(i + 1) % C];
//   - cut a loop short by one iteration: `for v in a .. b step s` runs to b - s.
//
// A mutant that check accepts is run serially from exec.DistinctInits and its postconditions
// checked on the values: if one fails, the mutant changed the result and check missed it. Every
// such miss fails the test; the score is logged.

// mutant is one mutation of a plan's text.
type mutant struct {
	what string // "delete op tx[s] at 31:3"
	src  []byte
}

// edit replaces src[from:to] with text.
func edit(src []byte, from, to int, text string) []byte {
	out := append([]byte{}, src[:from]...)
	out = append(out, text...)
	return append(out, src[to:]...)
}

// mutants lists the mutants of a plan.
func mutants(t *testing.T, path string, src []byte) []mutant {
	f, err := dsl.Parse(path, src)
	require.NoError(t, err)
	lines := diag.LineStarts(src)
	off := func(p diag.Pos) int { return lines[p.Line-1] + int(p.Col) - 1 }
	text := func(n dsl.Node) string { return string(src[off(n.Pos()):off(n.End())]) }
	counts := map[string]string{}
	for _, st := range f.Stmts {
		if b, ok := st.(*dsl.BufferStmt); ok {
			counts[b.Name.Name] = text(b.Count)
		}
	}
	var out []mutant
	add := func(what string, at dsl.Node, from, to int, repl string) {
		out = append(out, mutant{what: fmt.Sprintf("%s at %d:%d", what, at.Pos().Line, at.Pos().Col), src: edit(src, from, to, repl)})
	}
	shift := func(op *dsl.OpStmt, s *dsl.Slice) {
		if s == nil || s.For != nil {
			return
		}
		c := counts[s.Buf.Name]
		switch s.Kind {
		case dsl.SliceElem:
			add("shift "+text(s)+" of op "+text(op.Name), s, off(s.Lo.Pos()), off(s.Lo.End()), fmt.Sprintf("((%s) + 1) %% (%s)", text(s.Lo), c))
		case dsl.SliceRange:
			lo, hi := text(s.Lo), text(s.Hi)
			l := fmt.Sprintf("((%s) - (%s))", hi, lo)
			nlo := fmt.Sprintf("((%s) + %s) %% (%s)", lo, l, c)
			add("shift "+text(s)+" of op "+text(op.Name), s, off(s.Lo.Pos()), off(s.Hi.End()), nlo+" : "+nlo+" + "+l)
		}
	}
	var walk func([]dsl.Stmt)
	walk = func(stmts []dsl.Stmt) {
		for _, st := range stmts {
			switch st := st.(type) {
			case *dsl.OpStmt:
				if _, nop := st.Op.(*dsl.NopOp); !nop {
					add("delete op "+text(st.Name), st, off(st.Op.Pos()), off(st.Op.End()), "nop")
				}
				switch o := st.Op.(type) {
				case *dsl.SendOp:
					shift(st, o.Slice)
				case *dsl.RecvOp:
					shift(st, o.Slice)
				case *dsl.WriteOp:
					shift(st, o.Src)
					shift(st, o.Dst)
				case *dsl.ReadOp:
					shift(st, o.Src)
					shift(st, o.Dst)
				case *dsl.AtomicOp:
					shift(st, o.Target)
					shift(st, o.To)
				case *dsl.ReduceOp:
					shift(st, o.Dst)
					shift(st, o.Src)
				case *dsl.CopyOp:
					shift(st, o.Src)
					shift(st, o.Dst)
				}
			case *dsl.ForStmt:
				step := "1"
				if st.Step != nil {
					step = text(st.Step)
				}
				add("cut loop "+st.Var.Name+" short", st, off(st.To.Pos()), off(st.To.End()), fmt.Sprintf("(%s) - (%s)", text(st.To), step))
				walk(st.Body)
			case *dsl.IfStmt:
				walk(st.Then)
				walk(st.Else)
			}
		}
	}
	walk(f.Stmts)
	return out
}

// smallParams are the sizes the mutants run at (params a plan does not declare are left out).
var smallParams = map[string]int64{"n": 2, "c": 2, "chunks": 3, "slots": 2}

// verdict is what became of a mutant at one world size.
type verdict int

const (
	rejected  verdict = iota // check failed: caught
	unchanged                // check passed and every postcondition held on the values
	missed                   // check passed, a postcondition failed on the values
)

func judge(t *testing.T, path string, src []byte, params map[string]int64) (verdict, diag.Code, string) {
	g, err := planner.Load(t.Context(), path, src, params, planner.Options{})
	if err != nil {
		var l diag.List
		if errors.As(err, &l) && len(l) > 0 {
			return rejected, l[0].Code, ""
		}
		return rejected, "param", ""
	}
	// Distinct inits, but for the elements the preconditions of general expects fix: one run
	// per precondition.
	for _, e := range g.Expects {
		dg := exec.WithGivens(exec.DistinctInits(g), e.Given)
		init := exec.NewMemory(dg)
		require.NoError(t, init.ResetAll())
		final, err := exec.Reference(dg)
		require.NoError(t, err, "a plan check accepts runs")
		for _, r := range exec.CheckExpects(dg, init, final) {
			if !r.Held && ir.GivenKey(r.Expect.Given) == ir.GivenKey(e.Given) {
				return missed, "", dg.ExpectString(&r.Expect) + ": " + r.Detail
			}
		}
	}
	return unchanged, "", ""
}

func TestMutationPostconditions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("mutates every plan")
	}
	files, err := filepath.Glob("../plans/*.dag")
	require.NoError(t, err)
	total, caught, same := 0, 0, 0
	byCode := map[diag.Code]int{}
	for _, path := range files {
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		if !strings.Contains(string(src), "\nexpect ") {
			continue
		}
		f, err := dsl.Parse(path, src)
		require.NoError(t, err)
		params := map[string]int64{}
		for _, st := range f.Stmts {
			if p, ok := st.(*dsl.ParamStmt); ok {
				if v, ok := smallParams[p.Name.Name]; ok {
					params[p.Name.Name] = v
				}
			}
		}
		var sizes []int64
		for _, ranks := range []int64{2, 3, 4, 8} {
			params["ranks"] = ranks
			if _, err := planner.Load(t.Context(), path, src, params, planner.Options{}); err == nil {
				sizes = append(sizes, ranks)
			}
		}
		require.NotEmpty(t, sizes, path)
		for _, m := range mutants(t, path, src) {
			total++
			isCaught, changed := false, false
			var code diag.Code
			for _, ranks := range sizes {
				params["ranks"] = ranks
				v, c, detail := judge(t, path, m.src, params)
				switch v {
				case rejected:
					if !isCaught {
						code = c
					}
					isCaught = true
				case missed:
					changed = true
					t.Errorf("%s: %s (ranks=%d): check accepts it but %s", filepath.Base(path), m.what, ranks, detail)
				}
			}
			switch {
			case changed:
			case isCaught:
				caught++
				byCode[code]++
				t.Logf("%s: %s: caught (%s)", filepath.Base(path), m.what, code)
			default:
				same++
				t.Logf("%s: %s: result unchanged", filepath.Base(path), m.what)
			}
		}
	}
	codes := make([]string, 0, len(byCode))
	for c, n := range byCode {
		codes = append(codes, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(codes)
	t.Logf("mutants: %d; caught by check: %d (%s); result unchanged: %d; missed: %d", total, caught, strings.Join(codes, ", "), same, total-caught-same)
	require.GreaterOrEqual(t, total, 50)
}
