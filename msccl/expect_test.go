package msccl_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/coredag/coredag/msccl"
	"github.com/coredag/coredag/planner"
)

// A wrong algorithm, which checks clean otherwise (no race, no deadlock, every send matched), is
// rejected by the proof of its coll's postcondition, at the coll attribute of <algo>, saying
// what a wrong element holds.
func TestPostconditionRejects(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func() *xalgo
		want   string
	}{{
		// The last receive of GPU 1 lands one chunk off: chunk 3 is never written, chunk 0
		// twice (by the same threadblock, in order: no race).
		"offset", func() *xalgo {
			a := ringAllreduce(4, 1)
			tb, j := a.step(1, "r", 0)
			s := tb.steps[j]
			s.so, s.do = mod(s.do+1, 4), mod(s.do+1, 4)
			return a
		},
		`expect allreduce sum data: data[0] on rank 1 should hold the sum over ranks 0-3 of data[0], but holds the sum over ranks 0-3 of data[12] — another element's contributions: the contributions of ranks 0-3 to data[12] in place of theirs to data[0], data from 12 elements further on`,
	}, {
		// The local copy of a rank's own chunk is gone: that block of its output stays as it was.
		"removed", func() *xalgo {
			a := twoStepAlltoall(2, 2)
			tb, j := a.step(2, "cpy", 0)
			a.drop(2, tb, j)
			return a
		},
		`expect alltoall output from input: output[8] on rank 2 should hold input[8]@2, but holds output[8]@2`,
	}, {
		// An rrs that forgets its own contribution: a plain rcs.
		"contribution", func() *xalgo {
			a := ringReduceScatter(3, false)
			tb, j := a.step(0, "rrs", 0)
			tb.steps[j].typ = "rcs"
			return a
		},
		`expect reduce_scatter sum output from input: output[4] on rank 1 should hold the sum over ranks 0-2 of input[4], but holds the sum over ranks 1, 2 of input[4] — rank 0's contribution is missing`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			a := c.mutate()
			src := a.xml()
			_, err := planner.Load(t.Context(), a.name+".xml", src, map[string]int64{"chunk": chunk}, planner.Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant it to contain %s", err, c.want)
			}
			// The position is the coll attribute of <algo>, on line 1.
			col := strings.Index(string(src), "coll=") + 1
			if at := a.name + ".xml:1:" + strconv.Itoa(col) + ": expect "; !strings.Contains(err.Error(), at) {
				t.Fatalf("got %v\nwant it at %s", err, at)
			}
			if _, err := msccl.Convert(a.name+".xml", src, msccl.Options{}); err != nil {
				t.Fatalf("the XML itself should be well-formed and matched: %v", err)
			}
		})
	}
}

// The fixture .ci/run runs on libfabric is the generator's ring.
func TestRingFixture(t *testing.T) {
	src, err := os.ReadFile("../testdata/msccl/ring_allreduce_4.xml")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "-->\n")
	if want := string(ringAllreduce(4, 1).xml()); body != want {
		t.Fatalf("testdata/msccl/ring_allreduce_4.xml is not the generator's ring:\n%s", want)
	}
}

// Export without a coll takes it, and inplace and root, from the plan's expect: the XML of each
// two-sided plan of plans/ names its collective and proves it again. (pipeline_chain is not one:
// its credits are zero-byte sends, which MSCCL-IR cannot say.)
func TestExportColl(t *testing.T) {
	for _, c := range []struct{ plan, head string }{
		{"binomial_bcast", `coll="broadcast" root="0" inplace="1"`},
		{"ring_allgather", `coll="allgather" inplace="1"`},
		{"recursive_doubling_allreduce", `coll="allreduce" inplace="1"`},
	} {
		t.Run(c.plan, func(t *testing.T) {
			src, err := os.ReadFile("../plans/" + c.plan + ".dag")
			if err != nil {
				t.Fatal(err)
			}
			g, err := planner.Load(t.Context(), c.plan+".dag", src, nil, planner.Options{})
			if err != nil {
				t.Fatal(err)
			}
			x, err := msccl.Export(g, msccl.ExportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(x), c.head) {
				t.Fatalf("want %s in\n%s", c.head, x)
			}
			g2, err := planner.Load(t.Context(), c.plan+".xml", x, nil, planner.Options{})
			if err != nil {
				t.Fatalf("%v\n%s", err, x)
			}
			if len(g2.Expects) != 1 || g2.ExpectString(&g2.Expects[0]) == "" || g2.Expects[0].Kind != g.Expects[0].Kind || g2.Expects[0].Root != g.Expects[0].Root {
				t.Fatalf("the XML's postconditions %v, want the plan's %v", g2.Expects, g.Expects)
			}
			// --coll custom keeps the buffers' names and claims nothing.
			x, err = msccl.Export(g, msccl.ExportOptions{Coll: "custom"})
			if err != nil || !strings.Contains(string(x), `coll="custom"`) {
				t.Fatalf("%v\n%s", err, x)
			}
		})
	}
}

// An out-of-place reduce_scatter exports its output as the rank's block: a plan whose rank uses
// another block of it is refused at the op; without that op it exports and proves again.
func TestExportReduceScatterBlock(t *testing.T) {
	plan := `plan rs
param ranks = 2
buffer input f32[2] init rank + 1
buffer output f32[2]
buffer tmp f32[1]
queue q to 1 - rank peer q
op tx = send q input[1 - rank : 2 - rank]
op rx = recv q tmp
op cp = copy input[rank : rank + 1] to output[rank : rank + 1]
op red = reduce sum output[rank : rank + 1] from tmp after rx, cp
expect reduce_scatter sum output from input
`
	junk := "op junk = copy input[1 - rank : 2 - rank] to output[1 - rank : 2 - rank]\n"
	g, err := planner.Load(t.Context(), "rs.dag", []byte(plan+junk), nil, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = msccl.Export(g, msccl.ExportOptions{})
	if want := "rs.dag:12:4: junk uses output[1], outside the rank's block of output: out of place, a reduce_scatter's output on rank r is block r of the output, 1 element from element r * 1 (on rank 0; likewise on rank 1)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %s", err, want)
	}
	g, err = planner.Load(t.Context(), "rs.dag", []byte(plan), nil, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := msccl.Export(g, msccl.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(x), `coll="reduce_scatter" inplace="0"`) || !strings.Contains(string(x), `i_chunks="2" o_chunks="1"`) {
		t.Fatalf("got\n%s", x)
	}
	g2, err := planner.Load(t.Context(), "rs.xml", x, nil, planner.Options{})
	if err != nil || len(g2.Expects) != 1 {
		t.Fatalf("%v\n%s", err, x)
	}
}
