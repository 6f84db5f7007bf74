// Package viz is an output: it draws plans with Graphviz, reading package ir only. It builds
// two views as github.com/emicklei/dot graphs:
//
//   - the graph view (Graph) of an elaborated ir.Graph: one node per op, grouped in a cluster
//     per rank and, inside it, a cluster per queue and one for host ops; `after` edges solid,
//     send->recv and notify-write->recv matches dashed across ranks, queue order as light edges;
//   - the plan view (Plan) of a compiled ir.Plan: one lane per work queue per rank with the
//     WQEs in chain order left to right, WAIT entries fed by a dashed edge from the WQE whose
//     completion they count, ENABLE entries pointing at the last WQE they release.
//
// Timeline writes a third view, of a run rather than a plan: when each op completed
// (exec.Options.Timeline), as trace-event JSON for Perfetto.
//
// Render turns DOT text into SVG or PNG by running Graphviz's dot program (from PATH, or the
// absolute path in $COREDAG_DOT) as a child process; nothing of Graphviz is linked in or started
// until something is rendered. Without Graphviz, Render returns an error wrapping ErrNoDot; DOT
// output never needs it.
//
// Output is deterministic: nodes, clusters and edges are created in plan order and given ids that
// sort in that order (emicklei/dot writes nodes and clusters sorted by id), and no map is iterated.
// Large plans are summarised (see Options.Limit) unless Options.Full is set.
package viz

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/emicklei/dot"

	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
)

// DefaultLimit is the number of nodes above which a view is summarised when Options.Limit is 0.
const DefaultLimit = 400

// Options control what a view draws. The zero value draws every rank, summarised above
// DefaultLimit nodes.
type Options struct {
	// Ranks restricts the drawing to these ranks; nil draws every rank. Ranks left out that are
	// connected to drawn ones (by matched transfers) appear as one summary node each.
	Ranks []int
	// Limit is the node count above which repeated loop bodies, then whole ranks, are collapsed
	// into summary nodes. 0 means DefaultLimit.
	Limit int
	// Full draws every node whatever the count.
	Full bool
	// Highlight marks ops (graph view) or WQEs (plan view), e.g. a stuck WAIT and the WQE it awaits.
	Highlight Highlight
}

// Highlight names the elements a view draws in red, with an optional caption under the title.
type Highlight struct {
	Ops  []ir.OpID // graph view
	WQEs []WQERef  // plan view
	Note string    // caption, e.g. "stuck: WAIT right.scq >= 3 (reached 2)"
}

// WQERef names one WQE of a compiled plan: entry Index of queue Queue's chain on rank Rank.
type WQERef struct {
	Rank  int
	Queue int // index into the rank's queue list
	Index int // position in the chain
}

func (o *Options) limit() int {
	if o.Limit > 0 {
		return o.Limit
	}
	return DefaultLimit
}

// drawsRank reports whether rank r is selected by Options.Ranks.
func (o *Options) drawsRank(r int) bool {
	if o.Ranks == nil {
		return true
	}
	for _, x := range o.Ranks {
		if x == r {
			return true
		}
	}
	return false
}

// Colours and fonts shared by both views.
const (
	fontName       = "Helvetica"
	colorHighlight = "#d62728"
	colorMatch     = "#1f5fbf"
	colorOrder     = "#b0b0b0"
	colorRankBG    = "#f7f7f7"
	colorLaneBG    = "#ffffff"
	colorSummary   = "#fff3c4"
)

// newRoot creates the top-level directed graph with the attributes both views share.
func newRoot(title string, rankdir string) *dot.Graph {
	d := dot.NewGraph(dot.Directed)
	d.ID("coredag")
	d.Attr("rankdir", rankdir)
	d.Attr("fontname", fontName)
	d.Attr("fontsize", "12")
	d.Attr("labelloc", "t")
	d.Attr("label", title)
	d.Attr("newrank", "true")
	d.Attr("nodesep", "0.25")
	d.Attr("ranksep", "0.35")
	return d
}

// cluster adds a cluster subgraph. key must sort the clusters of one parent in drawing order.
func cluster(parent *dot.Graph, key, label, bg string) *dot.Graph {
	c := parent.Subgraph(key, dot.ClusterOption{})
	c.Attr("label", label)
	c.Attr("fontname", fontName)
	c.Attr("fontsize", "11")
	c.Attr("style", "filled,rounded")
	c.Attr("fillcolor", bg)
	c.Attr("color", "#999999")
	c.Attr("labeljust", "l")
	return c
}

// node adds a node with the attributes every node shares.
func node(parent *dot.Graph, id, label string) dot.Node {
	n := parent.Node(id)
	n.Attr("label", label)
	n.Attr("fontname", fontName)
	n.Attr("fontsize", "10")
	n.Attr("style", "filled")
	n.Attr("fillcolor", "white")
	return n
}

// highlight marks a node as part of the Highlight set.
func highlight(n dot.Node) {
	n.Attr("color", colorHighlight)
	n.Attr("fontcolor", colorHighlight)
	n.Attr("penwidth", "3")
}

// summaryNode adds a node standing for many collapsed elements.
func summaryNode(parent *dot.Graph, id, label string) dot.Node {
	n := node(parent, id, label)
	n.Attr("shape", "note")
	n.Attr("fillcolor", colorSummary)
	return n
}

// title is the heading of a view: plan name, view, ranks, params, the buffers the caller supplies,
// and the highlight note.
func title(kind string, g *ir.Graph, ranks int, note string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s view, %d rank", g.Name, kind, ranks)
	if ranks != 1 {
		b.WriteString("s")
	}
	for _, p := range g.Params {
		if p.Name == "ranks" {
			continue
		}
		fmt.Fprintf(&b, ", %s=%d", p.Name, p.Value)
	}
	sep := "\nextern buffers (the caller's memory): "
	for i := range g.Buffers {
		if g.Buffers[i].Extern {
			b.WriteString(sep + g.Buffers[i].Name)
			sep = ", "
		}
	}
	if note != "" {
		b.WriteString("\n")
		b.WriteString(note)
	}
	return b.String()
}

// posString is "file:line" with the file's base name, so drawings do not depend on where the
// plan was read from.
func posString(file string, line int) string {
	if line <= 0 {
		return ""
	}
	if file == "" {
		return fmt.Sprintf("line %d", line)
	}
	return fmt.Sprintf("%s:%d", filepath.Base(file), line)
}

// familyOf splits an indexed name into its base and index text: "tx[2]" -> "tx", "[2]".
func familyOf(name string) (base, index string) {
	if i := strings.IndexByte(name, '['); i > 0 {
		return name[:i], name[i:]
	}
	return name, ""
}

// orderClusters keeps clusters in the given order (left to right in a top-down drawing, top to
// bottom in a left-right one). Graphviz orders clusters to minimise crossings, and edges between
// clusters (matched transfers around a ring) easily make it draw rank 1 before rank 0. So each
// cluster gets an invisible anchor node outside all clusters; the anchors share one rank, chained
// by invisible edges that fix their order, and each anchor pulls its cluster's first node with
// anchorPull parallel invisible edges, which mincross counts as that many crossings if the
// clusters were out of order. One rank=same group only: emicklei/dot writes several groups in map
// order.
func orderClusters(d *dot.Graph, first []dot.Node, ids []string) {
	if len(first) < 2 {
		return
	}
	anchors := make([]dot.Node, len(first))
	for i := range first {
		a := d.Node(ids[i])
		a.Attr("label", "")
		a.Attr("shape", "point")
		a.Attr("style", "invis")
		a.Attr("width", "0")
		anchors[i] = a
		if i > 0 {
			d.Edge(anchors[i-1], a).Attr("style", "invis")
		}
	}
	for i, a := range anchors {
		for k := 0; k < anchorPull; k++ {
			d.Edge(a, first[i]).Attr("style", "invis")
		}
	}
	d.AddToSameRank("anchors", anchors...)
}

// anchorPull is how many crossings an anchor edge is worth (see orderClusters).
const anchorPull = 8

// mergeKey names a bundle of transfer edges between one drawn cluster (a rank's queue or lane)
// and one folded rank, in one direction.
type mergeKey struct {
	rank, lane int
	summary    int32
	in         bool // from the folded rank into the cluster
}

// merger draws the first edge of each bundle and counts the rest: with --rank, the many
// transfers to a neighbour's summary node otherwise make a tangle of parallel edges.
type merger struct {
	index map[mergeKey]int // lookup only: bundles keeps the order
	edges []dot.Edge
	count []int
}

func newMerger() *merger { return &merger{index: map[mergeKey]int{}} }

// seen counts one more transfer of key's bundle and reports whether it already has an edge.
func (m *merger) seen(k mergeKey) bool {
	i, ok := m.index[k]
	if ok {
		m.count[i]++
	}
	return ok
}

// add records e as the edge drawn for key's bundle.
func (m *merger) add(k mergeKey, e dot.Edge) {
	m.index[k] = len(m.edges)
	m.edges = append(m.edges, e)
	m.count = append(m.count, 1)
}

// label writes the count on every bundle of more than one transfer.
func (m *merger) label() {
	for i, e := range m.edges {
		if n := m.count[i]; n > 1 {
			e.Attr("label", english.Plural(n, "transfer"))
			e.Attr("fontname", fontName)
			e.Attr("fontsize", "9")
			e.Attr("fontcolor", colorMatch)
			e.Attr("penwidth", "1.5")
		}
	}
}

// Layout bounds: the most nodes a drawing of each view may have for Render to be asked for SVG or
// PNG. Graphviz's dot takes time that grows faster than the size of these views: with Graphviz
// 2.43 on one core of a 2-core AMD EPYC, the graph view of ring_allreduce took 1 s at 2784 nodes
// (24 ranks), 3.8 s at 4992 (32 ranks), twice that with the straight-edge retry of RenderContext,
// and 85 s at 20160 (64 ranks); its plan view took 3.2 s at 1488 nodes, 8.7 s at 2044 and 13.4 s
// at 2688. The bounds keep a layout within about 10 s with room for a busy machine (the 3808-node
// graph view took 6 s under a load of 6); larger drawings are for DOT output.
//
// Edges count as well: a view has about two per node (four in the plan view of an alltoall), but
// a plan of many `after` edges has far more, and dot's time grows with them (a 43-node graph view
// of 780 edges took 69 s, one of 207 nodes and 9,917 edges minutes). The edge bounds are twice
// and four times the node bounds.
const (
	MaxGraphLayout      = 4000
	MaxPlanLayout       = 1500
	MaxGraphLayoutEdges = 2 * MaxGraphLayout
	MaxPlanLayoutEdges  = 4 * MaxPlanLayout
)

// Nodes is the number of nodes of a drawing made by Graph or Plan, summary nodes included.
func Nodes(d *dot.Graph) int {
	n := 0
	d.VisitNodes(func(dot.Node) bool { n++; return false })
	return n
}

// Edges is the number of edges of a drawing made by Graph or Plan: the edge operators ("->") of
// its DOT text outside quoted strings.
func Edges(d *dot.Graph) int {
	return countEdges(d.String())
}

func countEdges(text string) int {
	n := 0
	quoted := false
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case quoted && c == '\\':
			i++ // an escaped character, perhaps a quote
		case c == '"':
			quoted = !quoted
		case !quoted && c == '-' && i+1 < len(text) && text[i+1] == '>':
			n++
			i++
		}
	}
	return n
}
