package coredag

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/coredag/coredag/exec/bootstrap"
)

// BenchmarkStartWait is one Start and Wait of a persistent collective, every rank in this
// process on the software NIC: an empty plan (the API's own cost: hand-off to the background
// goroutine and back) and the ring allreduce at a few sizes. Start itself allocates nothing;
// allocs/op counts the background iteration too.
func BenchmarkStartWait(b *testing.B) {
	ctx := context.Background()
	b.Run("empty", func(b *testing.B) {
		p, err := OpenSource("empty.dag", []byte("plan empty\nparam ranks = 1\nbuffer b u8[8] extern\n"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		c, err := p.Init(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if err := c.BindRank(0, "b", make([]byte, 8)); err != nil {
			b.Fatal(err)
		}
		runStartWait(b, c)
	})
	for _, n := range []int{16, 1024, 65536} { // f32 per chunk, 4 ranks
		b.Run(fmt.Sprintf("ring4/%dB", 4*4*n), func(b *testing.B) {
			p := openRingHang(b, 4, n, false, 10*time.Second)
			c, err := p.Init(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for r := 0; r < 4; r++ {
				if err := BindSlice(c, r, "data", make([]float32, 4*n)); err != nil {
					b.Fatal(err)
				}
			}
			runStartWait(b, c)
		})
	}
}

func runStartWait(b *testing.B, c *Coll) {
	ctx := context.Background()
	if err := c.Start(); err != nil { // the first start sets the queues up
		b.Fatal(err)
	}
	if err := c.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		if err := c.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStartAllocatesNothing: after the first start, Start and Wait of an in-process Coll
// allocate nothing, the background iteration included.
func TestStartAllocatesNothing(t *testing.T) {
	p := openRingHang(t, 4, 64, false, 10*time.Second)
	c, err := p.Init(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for r := 0; r < 4; r++ {
		if err := BindSlice(c, r, "data", make([]float32, 4*64)); err != nil {
			t.Fatal(err)
		}
	}
	startWaitAllocsNothing(t, c, "Start+Wait")
}

// BenchmarkBarrier is one barrier of two Worlds in this process, over channels and over
// coredag's TCP bootstrap (loopback): a start in a World of one rank per process pays two
// (before the iteration, so a fast peer's transfer never reaches memory not yet started; after
// it, so no Wait returns while a peer may still read or write the memory).
func BenchmarkBarrier(b *testing.B) {
	b.Run("channels", func(b *testing.B) { benchBarrier(b, chanWorlds(2)) })
	b.Run("bootstrap", func(b *testing.B) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		worlds := make([]World, 2)
		errs := make(chan error, 2)
		for r := range worlds {
			go func() {
				c, err := bootstrap.Connect(context.Background(), bootstrap.Config{World: bootstrap.World{Rank: r, Size: 2}, Addr: addr, Secret: testSecret})
				if err == nil {
					worlds[r] = &bootWorld{c: c}
				}
				errs <- err
			}()
		}
		for range worlds {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		defer worlds[0].(*bootWorld).Close()
		defer worlds[1].(*bootWorld).Close()
		benchBarrier(b, worlds)
	})
}

func benchBarrier(b *testing.B, worlds []World) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < b.N; i++ {
			_ = worlds[1].Barrier(context.Background())
		}
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := worlds[0].Barrier(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	<-done
}

// soloWorld is a World of one rank whose calls allocate nothing; it counts them.
type soloWorld struct{ barriers, allgathers int }

func (*soloWorld) Rank() int { return 0 }
func (*soloWorld) Size() int { return 1 }
func (w *soloWorld) Barrier(context.Context) error {
	w.barriers++
	return nil
}
func (w *soloWorld) Allgather(_ context.Context, send, recv []byte) error {
	w.allgathers++
	copy(recv, send)
	return nil
}

// TestStartInWorldAllocatesNothing: with a World, a start's own World calls (the allgather of
// one word before the iteration, bounded by the hang timeout) allocate nothing either.
func TestStartInWorldAllocatesNothing(t *testing.T) {
	p := openRingHang(t, 1, 64, true, 10*time.Second)
	w := &soloWorld{}
	c, err := p.Init(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Bind("data", make([]byte, 64*4)); err != nil {
		t.Fatal(err)
	}
	startWaitAllocsNothing(t, c, "Start+Wait in a World")
	// The ring's start allgather tells every process of a rebound extern buffer peers write;
	// it needs no end barrier (verify.Fences; TestWorldCallsFollowPlan).
	if w.barriers != 0 || w.allgathers < 51 {
		t.Errorf("%d barriers and %d allgathers in 51 starts: each start makes one allgather and no barrier", w.barriers, w.allgathers)
	}
}

// startWaitAllocsNothing runs one Start+Wait of c, then 50 more counting allocations: none is
// allowed. what names the case in the failure (51 starts in all).
func startWaitAllocsNothing(t *testing.T, c *Coll, what string) {
	t.Helper()
	step := func() {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if a := testing.AllocsPerRun(50, step); a != 0 {
		t.Errorf("%s allocates %v times per iteration, want 0", what, a)
	}
}
