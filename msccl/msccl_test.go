package msccl_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/msccl"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

const chunk = 4 // elements per chunk in the tests

func load(t *testing.T, name string, src []byte) *ir.Graph {
	t.Helper()
	g, err := planner.Load(t.Context(), name, src, map[string]int64{"chunk": chunk}, planner.Options{})
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, src)
	}
	return g
}

// run runs g on the software NIC with both engines and returns the memory.
func run(t *testing.T, g *ir.Graph) *exec.Memory {
	t.Helper()
	ref, err := exec.Reference(g)
	if err != nil {
		t.Fatal(err)
	}
	var mem *exec.Memory
	for _, engine := range []exec.Engine{exec.Offload, exec.Poll} {
		sn := softnic.New(softnic.Options{})
		engine, target, err := exec.Select(engine, "", sn.Caps())
		if err != nil {
			t.Fatal(err)
		}
		plan, err := lower.Compile(t.Context(), g, target)
		if err != nil {
			t.Fatal(err)
		}
		res, err := exec.Run(context.Background(), plan, sn, exec.Options{Engine: engine, Iters: 2, Reference: ref})
		if err != nil {
			t.Fatalf("%s engine: %v", engine, err)
		}
		if !res.OK {
			t.Fatalf("%s engine: memory differs from the reference", engine)
		}
		mem = res.Memory
	}
	return mem
}

// values is buffer name of rank r as float64s.
func values(t *testing.T, m *exec.Memory, r int, name string) []float64 {
	t.Helper()
	b, ok := m.Buffer(name)
	if !ok {
		t.Fatalf("no buffer %s", name)
	}
	var out []float64
	for _, v := range m.Values(r, b) {
		out = append(out, v.(float64))
	}
	return out
}

// input is the init of the input buffer: rank*1000 + i.
func input(r, i int) float64 { return float64(r*1000 + i) }

func checkAllreduce(t *testing.T, m *exec.Memory, n int) {
	for r := 0; r < n; r++ {
		got := values(t, m, r, msccl.BufInplace)
		for i, v := range got {
			want := 0.0
			for q := 0; q < n; q++ {
				want += input(q, i)
			}
			if v != want {
				t.Fatalf("rank %d element %d = %v, want the sum %v", r, i, v, want)
			}
		}
	}
}

func checkAlltoall(t *testing.T, m *exec.Memory, n int) {
	for r := 0; r < n; r++ {
		got := values(t, m, r, msccl.BufOutput)
		for i, v := range got {
			src, e := i/chunk, i%chunk
			if want := input(src, r*chunk+e); v != want {
				t.Fatalf("rank %d output element %d = %v, want %v (chunk %d of rank %d)", r, i, v, want, r, src)
			}
		}
	}
}

// checkReduceScatter: rank r's block r holds the sum of every rank's block r.
func checkReduceScatter(buf string) func(*testing.T, *exec.Memory, int) {
	return func(t *testing.T, m *exec.Memory, n int) {
		for r := 0; r < n; r++ {
			got := values(t, m, r, buf)
			for e := range chunk {
				i := r*chunk + e
				want := 0.0
				for q := 0; q < n; q++ {
					want += input(q, i)
				}
				if got[i] != want {
					t.Fatalf("rank %d %s element %d = %v, want the sum %v", r, buf, i, got[i], want)
				}
			}
		}
	}
}

// checkAllgather: block b of every rank's buf is rank b's input (in place: its block b).
func checkAllgather(buf string) func(*testing.T, *exec.Memory, int) {
	return func(t *testing.T, m *exec.Memory, n int) {
		for r := 0; r < n; r++ {
			for i, v := range values(t, m, r, buf) {
				b, e := i/chunk, i%chunk
				if buf == msccl.BufInplace {
					e = i
				}
				if want := input(b, e); v != want {
					t.Fatalf("rank %d %s element %d = %v, want %v (rank %d's)", r, buf, i, v, want, b)
				}
			}
		}
	}
}

// proven asserts that g carries the postcondition of coll, which loading it proved.
func proven(t *testing.T, g *ir.Graph, coll string) {
	t.Helper()
	if len(g.Expects) != 1 || g.Expects[0].Kind.String() != coll {
		t.Fatalf("want one expect %s, got %d postconditions", coll, len(g.Expects))
	}
}

// The msccl-tools example algorithms, reconstructed, for several GPU counts: each checks clean,
// proves the postcondition of its coll, runs on the software NIC with both engines, and computes
// its collective.
func TestAlgorithms(t *testing.T) {
	type tc struct {
		a     *xalgo
		check func(*testing.T, *exec.Memory, int)
	}
	var cases []tc
	for _, n := range []int{2, 3, 4, 8} {
		cases = append(cases, tc{ringAllreduce(n, 1), checkAllreduce}, tc{allpairsAllreduce(n), checkAllreduce})
	}
	cases = append(cases, tc{ringAllreduce(4, 2), checkAllreduce})
	for _, n := range []int{2, 4, 8} {
		cases = append(cases, tc{recursiveHalvingDoubling(n), checkAllreduce})
	}
	for _, s := range [][2]int{{2, 2}, {2, 3}, {3, 2}} {
		cases = append(cases, tc{hierarchicalAllreduce(s[0], s[1]), checkAllreduce}, tc{twoStepAlltoall(s[0], s[1]), checkAlltoall})
	}
	for _, n := range []int{2, 3, 5} {
		cases = append(cases,
			tc{ringReduceScatter(n, true), checkReduceScatter(msccl.BufInplace)}, tc{ringReduceScatter(n, false), checkReduceScatter(msccl.BufOutput)},
			tc{ringAllgather(n, true), checkAllgather(msccl.BufInplace)}, tc{ringAllgather(n, false), checkAllgather(msccl.BufOutput)})
	}
	for _, c := range cases {
		t.Run(c.a.name, func(t *testing.T) {
			src := c.a.xml()
			g := load(t, c.a.name+".xml", src)
			proven(t, g, c.a.coll)
			c.check(t, run(t, g), g.Ranks)
			g2 := roundTrip(t, c.a.name, src, c.a.coll)
			proven(t, g2, c.a.coll)
			c.check(t, run(t, g2), g2.Ranks)
		})
	}
}

// roundTrip: XML -> plan -> XML -> plan gives the same ops and the same happens-before order
// (for algorithms without rrs steps, which export writes as r, re and s), and exporting again
// gives the same XML (a fixed point). The imported .dag loads to the same ops and edges as the
// XML. It returns the plan of the exported XML.
func roundTrip(t *testing.T, name string, src []byte, coll string) *ir.Graph {
	t.Helper()
	g1 := load(t, name+".xml", src)
	x2, err := msccl.Export(g1, msccl.ExportOptions{Coll: coll})
	if err != nil {
		t.Fatal(err)
	}
	g2 := load(t, name+".2.xml", x2)
	if bytes.Contains(src, []byte(`type="rrs"`)) {
		// rrs expands to recv, reduce into the slot, send from the slot: three steps.
	} else if a, b := opSet(g1), opSet(g2); !slices.Equal(a, b) {
		t.Fatalf("ops differ after a round trip:\n%s\n----\n%s\n----\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"), x2)
	}
	if a, b := order(g1), order(g2); !bytes.Contains(src, []byte(`type="rrs"`)) && !slices.Equal(a, b) {
		t.Fatalf("happens-before differs after a round trip: %d vs %d ordered pairs\n%s", len(a), len(b), x2)
	}
	x3, err := msccl.Export(g2, msccl.ExportOptions{Coll: coll})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x2, x3) {
		t.Fatalf("export is not a fixed point:\n%s\n----\n%s", x2, x3)
	}
	f, err := msccl.Convert(name+".xml", src, msccl.Options{Import: true})
	if err != nil {
		t.Fatal(err)
	}
	text := dsl.Format(f)
	gd := load(t, name+".dag", text)
	if a, b := opSet(g1), opSet(gd); !slices.Equal(a, b) {
		t.Fatalf("the imported .dag has other ops than the XML")
	}
	if !slices.Equal(edges(g1), edges(gd)) || !slices.Equal(order(g1), order(gd)) {
		t.Fatalf("the imported .dag has other edges than the XML")
	}
	return g2
}

// opKey describes an op without its name: rank, kind, queue peer and place, slices.
func opKey(g *ir.Graph, id int) string {
	o := &g.Ops[id]
	s := fmt.Sprintf("r%d %s", o.Rank, o.Kind)
	if o.Queue != ir.None {
		s += fmt.Sprintf(" to %d #%d", g.Queues[o.Queue].PeerRank, o.Index)
	}
	for _, sl := range []ir.Slice{o.Src, o.Dst} {
		if sl.Valid() {
			s += " " + g.SliceString(sl)
		}
	}
	return s
}

func edges(g *ir.Graph) []string {
	var out []string
	for _, e := range g.Edges {
		out = append(out, opKey(g, int(e.From))+" < "+opKey(g, int(e.To)))
	}
	slices.Sort(out)
	return out
}

func opSet(g *ir.Graph) []string {
	var out []string
	for i := range g.Ops {
		if g.Ops[i].Kind != ir.OpNop {
			out = append(out, opKey(g, i))
		}
	}
	slices.Sort(out)
	return out
}

// order lists every pair of ops (a, b) with a path of after edges from a to b, by their keys;
// nops, which export passes dependencies through, are left out as ends.
func order(g *ir.Graph) []string {
	var out []string
	for i := range g.Ops {
		if g.Ops[i].Kind == ir.OpNop {
			continue
		}
		seen := map[int32]bool{}
		stack := []int32{int32(i)}
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, s := range g.Succs(ir.OpID(x)) {
				if !seen[s] {
					seen[s] = true
					stack = append(stack, s)
					if g.Ops[s].Kind != ir.OpNop {
						out = append(out, opKey(g, i)+" < "+opKey(g, int(s)))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// Every fixture in testdata/msccl: the good ones check clean and run; the bad ones give the
// diagnostics their .err file lists (file:line:col: message, one per line).
func TestFixtures(t *testing.T) {
	files, _ := filepath.Glob("../testdata/msccl/*.xml")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Base(file)
			want, werr := os.ReadFile(strings.TrimSuffix(file, ".xml") + ".err")
			g, err := planner.Load(t.Context(), name, src, map[string]int64{"chunk": chunk}, planner.Options{})
			if werr != nil {
				if err != nil {
					t.Fatalf("%v", err)
				}
				run(t, g)
				return
			}
			if err == nil {
				t.Fatalf("no error, want\n%s", want)
			}
			var got strings.Builder
			for _, line := range strings.Split(err.Error(), "\n") {
				got.WriteString(line + "\n")
			}
			if !strings.Contains(got.String(), strings.TrimSpace(string(want))) {
				t.Fatalf("got\n%s\nwant it to contain\n%s", got.String(), want)
			}
		})
	}
}

// Export refuses what MSCCL-IR cannot say, at the op.
func TestExportRefuses(t *testing.T) {
	src, err := os.ReadFile("../plans/ring_allreduce.dag")
	if err != nil {
		t.Fatal(err)
	}
	g, err := planner.Load(t.Context(), "ring_allreduce.dag", src, map[string]int64{"ranks": 3, "n": 4}, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = msccl.Export(g, msccl.ExportOptions{})
	if err == nil || !strings.Contains(err.Error(), "ring_allreduce.dag:40:6: ag[0] is a write with notify, which MSCCL-IR cannot express: export takes the two-sided subset (send, recv, reduce, copy, nop) (and 1 more errors)") {
		t.Fatalf("got %v", err)
	}
	src, err = os.ReadFile("../plans/atomic_fanin.dag")
	if err != nil {
		t.Fatal(err)
	}
	g, err = planner.Load(t.Context(), "atomic_fanin.dag", src, nil, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = msccl.Export(g, msccl.ExportOptions{})
	if err == nil || !strings.Contains(err.Error(), "bump is an atomic add, which MSCCL-IR cannot express") {
		t.Fatalf("got %v", err)
	}
}

// Export of a two-sided .dag plan written by hand (buffers of any name and size, host ops, a
// nop): the XML checks, runs and computes the allreduce.
func TestExportPlan(t *testing.T) {
	src := []byte(`plan ring
param ranks = 4
param n = 6
buffer data f32[ranks * n] init rank * 10 + i
buffer tmp f32[n]
queue right to (rank + 1) % ranks peer left
queue left to (rank - 1) % ranks peer right
for s in 0 .. ranks - 1 {
  let sc = (rank - s) % ranks
  let rc = (rank - s - 1) % ranks
  op tx[s] = send right data[sc * n : (sc + 1) * n]
  op rx[s] = recv left tmp
  op red[s] = reduce sum data[rc * n : (rc + 1) * n] from tmp after rx[s]
  if s > 0 { tx[s], rx[s] after red[s - 1] }
}
op mid = nop after red[ranks - 2]
for s in 0 .. ranks - 1 {
  let c = (rank - s + 1) % ranks
  let d = (rank - s) % ranks
  op ag[s] = send right data[c * n : (c + 1) * n]
  op got[s] = recv left data[d * n : (d + 1) * n]
  if s == 0 { ag[s] after mid } else { ag[s] after got[s - 1] }
}
`)
	g, err := planner.Load(t.Context(), "ring.dag", src, nil, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := msccl.Export(g, msccl.ExportOptions{Coll: "allreduce"})
	if err != nil {
		t.Fatal(err)
	}
	g2 := load(t, "ring.xml", x)
	m := run(t, g2)
	for r := range 4 {
		got := values(t, m, r, msccl.BufInplace) // a plan buffer called data is in place
		for i, v := range got {
			want := 0.0
			for q := range 4 {
				want += input(q, i) // the import's init, not the plan's: MSCCL buffers have none
			}
			if v != want {
				t.Fatalf("rank %d element %d = %v, want %v\n%s", r, i, v, want, x)
			}
		}
	}
}
