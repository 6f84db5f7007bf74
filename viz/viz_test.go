package viz

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/emicklei/dot"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/drawtest"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/viz")

const goldenDir = "../testdata/viz"

// loadPlans loads every plan of plans/ with its default parameters.
func loadPlans(t testing.TB) map[string]*ir.Graph {
	t.Helper()
	files, err := filepath.Glob("../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no plans in plans/")
	out := map[string]*ir.Graph{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		g, err := planner.Load(t.Context(), f, src, nil, planner.Options{})
		require.NoError(t, err, "loading %s", f)
		out[strings.TrimSuffix(filepath.Base(f), ".dag")] = g
	}
	return out
}

func sortedNames(m map[string]*ir.Graph) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	// sort without importing sort for a handful of names
	for i := 1; i < len(names); i++ {
		for j := i; j > 0 && names[j] < names[j-1]; j-- {
			names[j], names[j-1] = names[j-1], names[j]
		}
	}
	return names
}

// compile compiles g for connectx, or for generic when a plan does not fit connectx (whole
// chains pre-posted within the declared depths).
func compile(t testing.TB, g *ir.Graph) *ir.Plan {
	t.Helper()
	for _, target := range []string{"connectx", "generic"} {
		tg, err := ir.LookupTarget(target)
		require.NoError(t, err)
		if p, err := lower.Compile(t.Context(), g, tg); err == nil {
			return p
		}
	}
	t.Fatalf("%s compiles for no target", g.Name)
	return nil
}

// has reports whether s contains sub, without dumping s on failure.
func has(t *testing.T, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Errorf("DOT output lacks %q", sub)
	}
}

func hasNot(t *testing.T, s, sub string) {
	t.Helper()
	if strings.Contains(s, sub) {
		t.Errorf("DOT output has %q", sub)
	}
}

// golden compares got with testdata/viz/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *update {
		require.NoError(t, os.MkdirAll(goldenDir, 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file (run go test ./viz -update)")
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the golden file; run go test ./viz -update and review the diff", path)
	}
}

// TestGolden pins the DOT of both views of every plan in plans/.
func TestGolden(t *testing.T) {
	t.Parallel()
	plans := loadPlans(t)
	for _, name := range sortedNames(plans) {
		g := plans[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			gd := Graph(g, Options{}).String()
			golden(t, name+".graph.dot", []byte(gd))
			pd := Plan(compile(t, g), Options{}).String()
			golden(t, name+".plan.dot", []byte(pd))
			// Same input, same bytes.
			assert.Equal(t, gd, Graph(g, Options{}).String())
			assert.Equal(t, pd, Plan(compile(t, g), Options{}).String())
		})
	}
}

// svgText collects the character data of an SVG document, checking that it is well-formed XML.
func svgText(t *testing.T, svg []byte) string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	dec.Strict = true
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "SVG is not well-formed XML")
		if cd, ok := tok.(xml.CharData); ok {
			text.Write(cd)
			text.WriteByte('\n')
		}
	}
	return text.String()
}

// visibleEdges counts the edges of DOT text as emicklei/dot writes them that Graphviz draws.
var dotEdge = regexp.MustCompile(`(?m)^\s*\w+->\w+(\[.*\])?;$`)

func visibleEdges(dotText string) int {
	n := 0
	for _, e := range dotEdge.FindAllString(dotText, -1) {
		if !strings.Contains(e, `style="invis"`) {
			n++
		}
	}
	return n
}

// TestSVGHasEveryOp renders both views of every plan and finds every op's name in the text, and
// every visible edge of the DOT drawn (old Graphviz releases lose edges they cannot route).
func TestSVGHasEveryOp(t *testing.T) {
	t.Parallel()
	needDot(t)
	plans := loadPlans(t)
	for _, name := range sortedNames(plans) {
		g := plans[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, view := range []string{"graph", "plan"} {
				d := Graph(g, Options{})
				if view == "plan" {
					d = Plan(compile(t, g), Options{})
				}
				var buf bytes.Buffer
				require.NoError(t, Write(d, SVG, &buf))
				text := svgText(t, buf.Bytes())
				for i := range g.Ops {
					assert.Contains(t, text, g.Ops[i].Name, "%s view lacks %s", view, g.OpString(ir.OpID(i)))
				}
				edges := visibleEdges(d.String())
				assert.Positive(t, edges)
				assert.Equal(t, edges, strings.Count(buf.String(), `class="edge"`), "%s view: edges drawn", view)
			}
		})
	}
}

// TestPNG: a PNG decodes, is drawn (filled shapes, dark strokes) and is the same bytes each time.
func TestPNG(t *testing.T) {
	t.Parallel()
	needDot(t)
	g := ringGraph(2, 16) // 2 ranks: at 4, dot took seconds to lay out and rasterize
	var buf bytes.Buffer
	require.NoError(t, Write(Graph(g, Options{}), PNG, &buf))
	drawtest.CheckPNG(t, buf.Bytes(), "#d6e6fa", "#d9f0d3", colorRankBG)
	var again bytes.Buffer
	require.NoError(t, Write(Graph(g, Options{}), PNG, &again))
	assert.Equal(t, buf.Bytes(), again.Bytes(), "PNG output is not deterministic")

	buf.Reset()
	require.NoError(t, Write(Plan(compile(t, g), Options{}), PNG, &buf))
	drawtest.CheckPNG(t, buf.Bytes(), "#d6e6fa")
}

func TestFormatForFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want Format
		ok   bool
	}{{"a.dot", DOT, true}, {"a.gv", DOT, true}, {"x/b.SVG", SVG, true}, {"c.png", PNG, true}, {"d.pdf", "", false}, {"noext", "", false}} {
		f, err := FormatForFile(tc.name)
		if tc.ok {
			assert.NoError(t, err, tc.name)
			assert.Equal(t, tc.want, f, tc.name)
		} else {
			assert.Error(t, err, tc.name)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	assert.Error(t, Render([]byte("digraph { a }"), Format("pdf"), io.Discard))
	var buf bytes.Buffer
	require.NoError(t, Render([]byte("digraph { a }"), DOT, &buf))
	assert.Equal(t, "digraph { a }", buf.String())

	// Graphviz's own message says what is wrong with bad DOT text; nothing is written.
	needDot(t)
	buf.Reset()
	err := Render([]byte("digraph { a -> ; }"), SVG, &buf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "syntax error in line 1")
	assert.Zero(t, buf.Len())
}

// TestGraphViewStructure checks clusters, edge styles and labels on the hand-built ring.
func TestGraphViewStructure(t *testing.T) {
	t.Parallel()
	g := ringGraph(4, 1024)
	s := Graph(g, Options{}).String()
	for r := 0; r < 4; r++ {
		has(t, s, fmt.Sprintf(`label="rank %d"`, r))
	}
	has(t, s, `label="queue right -> rank 1"`)
	has(t, s, `label="host"`)
	has(t, s, `label="tx[0]\nsend right data[0:1024]\nring_allreduce.dag:15"`)
	has(t, s, `label="ag[0]\nwrite right data[1024:2048] to data[1024:2048] notify\nring_allreduce.dag:22"`)
	// 4 ranks x 6 matched transfers, dashed; after edges solid black.
	assert.Equal(t, 4*6, strings.Count(s, `style="dashed"`))
	assert.Equal(t, 4*(3+2*2+3), strings.Count(s, `[color="black"]`))
	hasNot(t, s, "folded")
}

func TestGraphFoldsLoops(t *testing.T) {
	t.Parallel()
	g := ringGraph(16, 8) // 16 ranks x 75 ops = 1200 ops
	s := Graph(g, Options{}).String()
	has(t, s, `loop body x 12 folded\ntx, rx, red  [2] .. [13]\n36 ops: 12 send, 12 recv, 12 reduce`)
	has(t, s, `loop body x 12 folded\nag, got  [2] .. [13]\n24 ops: 12 recv, 12 write`)
	hasNot(t, s, "rank 15 (folded)")
	nodes := strings.Count(s, "fontsize=\"10\"")
	assert.LessOrEqual(t, nodes, DefaultLimit)
	full := Graph(g, Options{Full: true}).String()
	hasNot(t, full, "folded")
	has(t, full, `label="tx[7]\n`)
	assert.Equal(t, len(g.Ops), strings.Count(full, "fontsize=\"10\""))
	// Nodes counts every node statement: the ops, the summaries and one invisible anchor per rank.
	nodeStmt := regexp.MustCompile(`(?m)^\s*n\d+\[`)
	assert.Equal(t, len(nodeStmt.FindAllString(full, -1)), Nodes(Graph(g, Options{Full: true})))
	assert.Equal(t, len(g.Ops)+g.Ranks, Nodes(Graph(g, Options{Full: true})))
	assert.Equal(t, len(nodeStmt.FindAllString(s, -1)), Nodes(Graph(g, Options{})))
}

func TestGraphFoldsRanks(t *testing.T) {
	t.Parallel()
	g := ringGraph(16, 8)
	s := Graph(g, Options{Limit: 60}).String()
	has(t, s, `label="rank 0"`)
	has(t, s, `label="rank 1"`)
	has(t, s, `rank 15 (folded)\n75 ops: 15 send, 30 recv, 15 write, 15 reduce\nqueues: right, left`)
	hasNot(t, s, `label="rank 2"`)
	assert.LessOrEqual(t, strings.Count(s, "fontsize=\"10\""), 60)
}

func TestGraphRankFilterAndHighlight(t *testing.T) {
	t.Parallel()
	g := ringGraph(4, 8)
	first, _ := g.RankOps(2)
	s := Graph(g, Options{Ranks: []int{2}, Highlight: Highlight{Ops: []ir.OpID{first}, Note: "stuck here"}}).String()
	has(t, s, `label="rank 2"`)
	hasNot(t, s, `label="rank 1"`)
	// The neighbours appear as summaries because matched transfers reach them; rank 0 does not.
	has(t, s, "rank 1 (folded)")
	has(t, s, "rank 3 (folded)")
	hasNot(t, s, "rank 0 (folded)")
	has(t, s, `penwidth="3"`)
	has(t, s, "stuck here")
}

// TestRankFilterMergesTransfers: with one rank drawn, the transfers between one of its queues
// and a neighbour's summary node are one edge labelled with their count, in both views.
func TestRankFilterMergesTransfers(t *testing.T) {
	t.Parallel()
	g := ringGraph(4, 8)
	// Rank 1 sends 6 messages to rank 2 on "right" and receives 6 from rank 0 on "left".
	s := Graph(g, Options{Ranks: []int{1}}).String()
	assert.Equal(t, 2, strings.Count(s, `style="dashed"`), "one transfer edge per neighbour")
	assert.Equal(t, 2, strings.Count(s, `label="6 transfers"`))
	p := Plan(compile(t, g), Options{Ranks: []int{1}}).String()
	assert.Equal(t, 2, strings.Count(p, `constraint="false"`), "one transfer edge per neighbour")
	assert.Equal(t, 2, strings.Count(p, `label="6 transfers"`))
	// Unfiltered, nothing is folded and nothing merges.
	hasNot(t, Graph(g, Options{}).String(), "transfers")
	hasNot(t, Plan(compile(t, g), Options{}).String(), "transfers")
}

// TestEdges: Edges counts the edges of a drawing, across clusters, and not an arrow in a label.
func TestEdges(t *testing.T) {
	t.Parallel()
	d := dot.NewGraph(dot.Directed)
	c := d.Subgraph("x", dot.ClusterOption{})
	a, b := c.Node("a").Label(`a -> "b" \`), c.Node("b")
	e := d.Node("e").Label("->")
	c.Edge(a, b)
	d.Edge(a, e).Label(`"->"`)
	d.Edge(e, b)
	assert.Equal(t, 3, Edges(d))
	assert.Equal(t, 3, Nodes(d))
}
