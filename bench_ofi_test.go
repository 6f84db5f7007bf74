//go:build ofi && linux

package coredag

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// ofiBenchProviders are the libfabric providers the MPI bench compares, with their engines.
var ofiBenchProviders = []struct{ name, engine, target string }{
	{"shm", "poll", ""}, {"tcp;ofi_rxm", "poll", ""}, {"sockets", "offload", "triggered-sockets"},
}

// openRecursiveDoubling opens the MPI bench's small-message plan (the recursive doubling of
// examples/mpi/recursive_doubling_f32.dag) for 4 ranks of n f32 on a libfabric provider, every
// rank in this process, its data bound; it skips where the provider is not there.
func openRecursiveDoubling(tb testing.TB, prov, engine, target string, n int) *Coll {
	tb.Setenv("FI_SOCKETS_IFACE", "lo")
	const ranks = 4
	p, err := Open("examples/mpi/recursive_doubling_f32.dag", Options{Params: map[string]int64{"ranks": ranks, "n": int64(n)},
		Provider: "ofi", OFIProvider: prov, Engine: engine, Target: target, HangTimeout: 10 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	c, err := p.Init(context.Background(), nil)
	if err != nil {
		tb.Skip(err)
	}
	tb.Cleanup(func() { c.Close() })
	for r := 0; r < ranks; r++ {
		if err := BindSlice(c, r, "data", make([]float32, n)); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}

// BenchmarkOFIStartWait is one Start and Wait of the MPI bench's small-message plan, 4 ranks,
// every rank in this process on one goroutine, on libfabric's providers: what a start costs the
// CPU with no peer process to wait for (scripts/mpi-bench.sh runs one process per rank). ns/op
// is for all four ranks.
func BenchmarkOFIStartWait(b *testing.B) {
	for _, prov := range ofiBenchProviders {
		for _, bytes := range []int{8, 4096, 65536} {
			b.Run(fmt.Sprintf("%s/%dB", prov.name, bytes), func(b *testing.B) {
				runStartWait(b, openRecursiveDoubling(b, prov.name, prov.engine, prov.target, max(bytes/4, 4)))
			})
		}
	}
}

// TestOFIStartAllocatesNothing: after the first start, a start on libfabric allocates nothing
// either (a request's scatter/gather list once escaped to the heap for cgo, 16 allocations and
// 14 KB per start of the recursive doubling, and the garbage collector ran every few hundred).
func TestOFIStartAllocatesNothing(t *testing.T) {
	for _, prov := range ofiBenchProviders {
		t.Run(prov.name, func(t *testing.T) {
			startWaitAllocsNothing(t, openRecursiveDoubling(t, prov.name, prov.engine, prov.target, 256), "Start+Wait on "+prov.name)
		})
	}
}
