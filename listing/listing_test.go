package listing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"text/tabwriter"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

// TestChainLayout: writeChain lays out every chain of every plan as text/tabwriter lays out the
// same cells (padding 2, no minimum width), names and buffers in ASCII or not, ops declared in
// one file, in several or nowhere known.
func TestChainLayout(t *testing.T) {
	paths, err := filepath.Glob("../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, variant := range []string{"ascii", "wide", "files"} {
			wide := variant == "wide"
			g, err := planner.Load(t.Context(), path, src, map[string]int64{"ranks": 4}, planner.Options{})
			require.NoError(t, err, path)
			if wide { // names of more bytes than runes, in every column that is padded
				for i := range g.Buffers {
					g.Buffers[i].Name = "bü" + g.Buffers[i].Name
				}
				for i := range g.Ops {
					s := *g.Ops[i].Site
					s.Name = "ö" + s.Name
					g.Ops[i].Site = &s
				}
			}
			if variant == "files" { // runs of ops in another file, or in none
				other := diag.At("other/"+filepath.Base(path), 7, 1).File
				for i := range g.Ops {
					s := *g.Ops[i].Site
					switch i / 2 % 3 {
					case 1:
						s.Pos.File = other
					case 2:
						s.Pos = diag.Pos{}
					}
					if i%5 == 0 { // past the lines a column keeps cells for
						s.Pos.Line += maxValue
					}
					g.Ops[i].Site = &s
				}
			}
			for _, target := range []string{"connectx", "connectx-inline", "generic"} {
				tg, err := ir.LookupTarget(target)
				require.NoError(t, err)
				p, err := lower.Compile(t.Context(), g, tg)
				require.NoError(t, err, path)
				var b Block
				for r := range p.Ranks {
					rp := &p.Ranks[r]
					for _, q := range rp.Queues {
						if len(q.Chain) == 0 {
							continue
						}
						got := b.writeChain(nil, p, rp, q.Chain)
						require.Equal(t, tabChain(p, rp, q.Chain), string(got), "%s (%s) for %s: rank %d %s", path, variant, target, r, q.Name)
					}
				}
			}
		}
	}
}

// tabChain is the layout of a chain by text/tabwriter.
func tabChain(p *ir.Plan, rp *ir.RankPlan, chain []ir.WQE) string {
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	for k := range chain {
		e := &chain[k]
		op := p.OpOf(e)
		pos := "-"
		if op.Pos.IsValid() {
			pos = fmt.Sprintf("%s:%d", op.Pos.Filename(), op.Pos.Line)
		}
		fmt.Fprintf(tw, "    [%d]\t%s\t%s\t%s\t%s\t%s\n", k, e.Opcode, appendOperands(nil, p, rp, e), e.Flags, op.Name, pos)
	}
	tw.Flush()
	return out.String()
}

// TestIndexCell: the index cell counted up from row to row is the one written anew, past every
// new digit.
func TestIndexCell(t *testing.T) {
	for _, rows := range []int{1, 9, 10, 11, 100, 1001, 12345} {
		width := len(fmt.Sprintf("    [%d]", rows-1)) + 2
		var c indexCell
		c.reset(width)
		for k := range rows {
			want := fmt.Sprintf("%-*s", width, fmt.Sprintf("    [%d]", k))
			if got := string(c.next()); got != want {
				t.Fatalf("%d rows: row %d: cell %q, want %q", rows, k, got, want)
			}
		}
	}
}

// TestWordLimit: a plan whose watched word a library's starts would wrap says after how many,
// in the text listing's last line and in the JSON's word_limit; a plan without one has neither.
func TestWordLimit(t *testing.T) {
	src := `plan word_limit
param ranks = 2
buffer word i64[2] remote_atomic init -3
queue q to 1 - rank peer q
if rank == 1 {
  op bump = atomic add q word[1] 4611686018427387904
}
if rank == 0 {
  op got = wait word[1] >= 1
}
`
	g, err := planner.Load(t.Context(), "w.dag", []byte(src), nil, planner.Options{})
	require.NoError(t, err)
	tg, err := ir.LookupTarget("generic")
	require.NoError(t, err)
	p, err := lower.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	var text, js bytes.Buffer
	require.NoError(t, Write(&text, p, Options{}))
	require.Contains(t, text.String(), "\nwords: word[1] on rank 0, watched by wait got, wraps after 2 iterations with no reset between them (a library's starts; from -3, +4611686018427387904 per iteration, largest i64 9223372036854775807)\n")
	require.NoError(t, WriteJSON(&js, p, Options{}))
	var doc struct {
		WordLimit map[string]any `json:"word_limit"`
	}
	d := json.NewDecoder(&js)
	d.UseNumber()
	require.NoError(t, d.Decode(&doc))
	require.Equal(t, map[string]any{"rank": json.Number("0"), "word": "word[1]", "wait": "got", "start": json.Number("-3"),
		"per_iteration": json.Number("4611686018427387904"), "iterations": json.Number("2")}, doc.WordLimit)

	ring, err := os.ReadFile("../plans/ring_allreduce.dag")
	require.NoError(t, err)
	g, err = planner.Load(t.Context(), "../plans/ring_allreduce.dag", ring, nil, planner.Options{})
	require.NoError(t, err)
	p, err = lower.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	text.Reset()
	js.Reset()
	require.NoError(t, Write(&text, p, Options{}))
	require.NoError(t, WriteJSON(&js, p, Options{}))
	require.NotContains(t, text.String(), "words:")
	require.NotContains(t, js.String(), "word_limit")
}
