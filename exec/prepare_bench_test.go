package exec_test

import (
	"context"
	"testing"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
)

// ringEngines are the engines BenchmarkRunRing8 and BenchmarkRunRing8OpenEach measure.
var ringEngines = []struct {
	name   string
	engine exec.Engine
}{{"poll", exec.Poll}, {"offload", exec.Offload}}

// BenchmarkRunRing8 is one iteration of the ring allreduce at 8 ranks (64 f32 per chunk) on the
// software NIC, per op, with the plan prepared once outside the loop: each op is a Session.Run,
// which re-arms the queues and runs. Set beside BenchmarkRunRing8OpenEach, and beside the same
// benchmark before the session API (where every exec.Run opened, registered, connected and tore
// down all ranks), it shows what preparing once saves.
func BenchmarkRunRing8(b *testing.B) {
	g := exec.RingAllreduceForTest(8, 64)
	ref, err := exec.Reference(g)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ringEngines {
		b.Run(e.name, func(b *testing.B) { runPrepared(b, g, ref, e.engine) })
	}
}

// runPrepared compiles g for engine, prepares it once on a software NIC and times one
// Session.Run per op, each checked against ref.
func runPrepared(b *testing.B, g *ir.Graph, ref *exec.Memory, engine exec.Engine) {
	plan := mustCompile(b, g, engine)
	sn := softnic.New(softnic.Options{NoCrossChannel: engine == exec.Poll})
	s, err := exec.Prepare(context.Background(), plan, sn, exec.Options{Engine: engine, Reference: ref})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		res, err := s.Run(context.Background(), 1)
		if err != nil || !res.OK {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkRunRing8OpenEach is BenchmarkRunRing8 through exec.Run: every op prepares, runs one
// iteration and closes.
func BenchmarkRunRing8OpenEach(b *testing.B) {
	g := exec.RingAllreduceForTest(8, 64)
	ref, err := exec.Reference(g)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ringEngines {
		b.Run(e.name, func(b *testing.B) {
			plan := mustCompile(b, g, e.engine)
			sn := softnic.New(softnic.Options{NoCrossChannel: e.engine == exec.Poll})
			b.ReportAllocs()
			for b.Loop() {
				res, err := exec.Run(context.Background(), plan, sn, exec.Options{Engine: e.engine, Reference: ref})
				if err != nil || !res.OK {
					b.Fatal(err, res)
				}
			}
		})
	}
}
