package msccl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/coredag/coredag/diag"
)

// stepsAlgo is one GPU with one threadblock of the given steps, on one line.
func stepsAlgo(steps string) []byte {
	return []byte(`<algo name="x" proto="Simple" coll="custom" ngpus="1" nchunksperloop="1" nchannels="1" inplace="0">` +
		`<gpu id="0" i_chunks="1" o_chunks="1" s_chunks="0"><tb id="0" send="-1" recv="-1" chan="0">` +
		steps + `</tb></gpu></algo>` + "\n")
}

// wantCapped checks that err is a list of diag.MaxErrors diagnostics of the given message and
// one "too many errors" last.
func wantCapped(t *testing.T, err error, msg string) {
	t.Helper()
	l, ok := err.(diag.List)
	if !ok {
		t.Fatalf("got %v, want a diag.List", err)
	}
	if len(l) != diag.MaxErrors+1 {
		t.Fatalf("%d diagnostics, want %d: %v", len(l), diag.MaxErrors+1, err)
	}
	for _, d := range l[:diag.MaxErrors] {
		if !strings.Contains(d.Msg, msg) {
			t.Fatalf("got %q, want %q", d.Msg, msg)
		}
	}
	last := l[len(l)-1]
	if want := fmt.Sprintf("too many errors: stopped after the first %d", diag.MaxErrors); last.Msg != want || last.Code != diag.Limit {
		t.Errorf("the last diagnostic is %v [%s], want %q", last, last.Code, want)
	}
}

// TestParseCapsErrors: a file of bad elements gets diag.MaxErrors diagnostics and "too many
// errors"; the reader stops there rather than read on (256 KiB of <step/> gave 75k
// diagnostics).
func TestParseCapsErrors(t *testing.T) {
	const n = 40000
	src := stepsAlgo(strings.Repeat("<step/>", n))
	_, err := Parse("steps.xml", src)
	wantCapped(t, err, "<step> has no")
	last := err.(diag.List)[diag.MaxErrors]
	if last.Pos.Line != 1 || int(last.Pos.Col) > len(src)/100 {
		t.Errorf("stopped at %v, want near the start of the line", last.Pos)
	}

	// Duplicate attributes are capped too, within one start tag.
	var b strings.Builder
	b.WriteString(`<step s="0" type="nop"`)
	for range 1000 {
		b.WriteString(` s="0"`)
	}
	b.WriteString(`/>`)
	_, err = Parse("dup.xml", stepsAlgo(b.String()))
	wantCapped(t, err, "attribute s appears twice")
}

// TestCheckCapsErrors: an algorithm that reads well but whose steps are all wrong gets
// diag.MaxErrors diagnostics and "too many errors" from the checks.
func TestCheckCapsErrors(t *testing.T) {
	var b strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&b, `<step s="%d" type="bogus"/>`, i)
	}
	_, err := Convert("bogus.xml", stepsAlgo(b.String()), Options{})
	wantCapped(t, err, "unknown step type \"bogus\"")
}
