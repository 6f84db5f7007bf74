package coredag

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testHang = time.Second

// openRing opens ring_allreduce with data extern; shared, when set, makes Init take Worlds of
// one rank each, on one software NIC.
func openRing(t testing.TB, ranks, n int, shared bool) *Plan {
	return openRingHang(t, ranks, n, shared, testHang)
}

func openRingHang(t testing.TB, ranks, n int, shared bool, hang time.Duration) *Plan {
	t.Helper()
	p, err := Open("plans/ring_allreduce.dag", Options{Params: map[string]int64{"ranks": int64(ranks), "n": int64(n)},
		HangTimeout: hang})
	require.NoError(t, err)
	if shared {
		p.prov = sharedSoftNIC()
	}
	return p
}

// fill writes iteration it's data of rank r and returns it.
func fill(d []float32, r, it int) {
	for i := range d {
		d[i] = float32((r+1)*(i%5) + it%3)
	}
}

// TestWorldsRingAllreduce runs the ring allreduce as one Coll per rank, each on its own World
// and goroutine, as processes would: fresh data each iteration, compared with a serial sum.
func TestWorldsRingAllreduce(t *testing.T) {
	for _, progress := range []string{"", "caller"} {
		t.Run("progress="+progress, func(t *testing.T) {
			// Three polling goroutines on a shared machine: a generous hang timeout.
			p := openRingHang(t, 3, 64, true, 10*time.Second)
			p.opts.Progress = progress
			worldsRingAllreduce(t, p)
		})
	}
}

// worldsRingAllreduce is TestWorldsRingAllreduce on p, a ring allreduce of 3 ranks and n 64.
func worldsRingAllreduce(t *testing.T, p *Plan) {
	const ranks, n, iters = 3, 64, 30
	worlds := chanWorlds(ranks)
	colls := make([]*Coll, ranks)
	var wg sync.WaitGroup
	errs := make([]error, ranks)
	for r := range colls {
		wg.Add(1)
		go func() { // Init is collective: every rank at once
			defer wg.Done()
			colls[r], errs[r] = p.Init(context.Background(), worlds[r])
		}()
	}
	wg.Wait()
	for r := range colls {
		require.NoError(t, errs[r], "rank %d", r)
		defer colls[r].Close()
	}
	bad := make([]int, ranks)
	for r := range colls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := colls[r]
			d := make([]float32, ranks*n)
			if errs[r] = BindSlice(c, r, "data", d); errs[r] != nil {
				return
			}
			want := make([]float32, ranks*n)
			peer := make([]float32, ranks*n)
			for it := 0; it < iters; it++ {
				fill(d, r, it)
				clear(want)
				for q := 0; q < ranks; q++ {
					fill(peer, q, it)
					for i := range want {
						want[i] += peer[i]
					}
				}
				if errs[r] = c.Start(); errs[r] != nil {
					return
				}
				if errs[r] = c.Wait(context.Background()); errs[r] != nil {
					return
				}
				for i := range want {
					if d[i] != want[i] {
						bad[r]++
					}
				}
			}
		}()
	}
	wg.Wait()
	for r := range colls {
		assert.NoError(t, errs[r], "rank %d", r)
		assert.Zero(t, bad[r], "rank %d: elements that differ from the serial sum", r)
	}
}

// TestStartUnbound: a start before every extern buffer is bound names the buffer.
func TestStartUnbound(t *testing.T) {
	p := openRing(t, 2, 8, false)
	c, err := p.Init(context.Background(), nil)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, BindSlice(c, 0, "data", make([]float32, 16)))
	err = c.Start()
	require.ErrorIs(t, err, ErrUnbound)
	assert.Contains(t, err.Error(), "buffer data on rank 1")
	assert.Contains(t, err.Error(), "ring_allreduce.dag:")
	require.NoError(t, BindSlice(c, 1, "data", make([]float32, 16)))
	require.NoError(t, c.Start())
	require.NoError(t, c.Wait(context.Background()))
}

// TestSecondStartBusy: a start before the previous one was waited for is refused; the first
// completes normally.
func TestSecondStartBusy(t *testing.T) {
	p := openRing(t, 2, 8, false)
	c, err := p.Init(context.Background(), nil)
	require.NoError(t, err)
	defer c.Close()
	for r := 0; r < 2; r++ {
		require.NoError(t, BindSlice(c, r, "data", make([]float32, 16)))
	}
	require.NoError(t, c.Start())
	err = c.Start()
	require.ErrorIs(t, err, ErrBusy)
	assert.Contains(t, err.Error(), "wait for it first")
	require.ErrorIs(t, c.BindRank(0, "data", make([]byte, 64)), ErrBusy)
	require.NoError(t, c.Wait(context.Background()))
	done, err := c.Test()
	assert.True(t, done)
	assert.NoError(t, err)
	require.NoError(t, c.Start())
	require.NoError(t, c.Wait(context.Background()))
}

// TestBindErrors: wrong size, element type, alignment, scratch and unknown buffers, each an
// ErrBind naming the declaration.
func TestBindErrors(t *testing.T) {
	p := openRing(t, 2, 8, false)
	c, err := p.Init(context.Background(), nil)
	require.NoError(t, err)
	defer c.Close()
	raw := make([]byte, 16*4+8)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"size", c.BindRank(0, "data", make([]byte, 60)), "buffer data is 64 bytes (16 f32), the memory given is 60 bytes"},
		{"type", BindSlice(c, 0, "data", make([]float64, 16)), "buffer data holds f32, bound to a slice of float64"},
		{"count", BindSlice(c, 0, "data", make([]float32, 17)), "buffer data has 16 elements, bound to a slice of 17"},
		{"signed", BindSlice(c, 0, "data", make([]int32, 16)), "buffer data holds f32, bound to a slice of int32"},
		{"align", c.BindRank(0, "data", raw[2:66]), "aligned to 4 bytes"},
		{"nil", c.BindRank(0, "data", nil), "buffer data: no memory given"},
		{"scratch", c.BindRank(0, "tmp", make([]byte, 32)), "buffer tmp is coredag's scratch"},
		{"unknown", c.BindRank(0, "nope", make([]byte, 32)), `no buffer "nope"`},
		{"rank", c.BindRank(2, "data", make([]byte, 64)), "rank 2"},
		{"one rank", c.Bind("data", make([]byte, 64)), "use BindRank"},
	} {
		require.ErrorIs(t, tc.err, ErrBind, tc.name)
		assert.Contains(t, tc.err.Error(), tc.want, tc.name)
		if tc.name != "unknown" && tc.name != "one rank" {
			assert.Contains(t, tc.err.Error(), "ring_allreduce.dag:2", tc.name) // the declaration's line
		}
	}
}

// TestRebind: a buffer peers do not access remotely is rebound between starts, and the next
// start runs on the new memory; a remotely accessed one is refused, and a wrong size too.
func TestRebind(t *testing.T) {
	for _, engine := range []string{"offload", "poll"} {
		t.Run(engine, func(t *testing.T) { testRebind(t, engine) })
	}
}

func testRebind(t *testing.T, engine string) {
	const ranks, chunks, c = 3, 4, 16
	p, err := Open("plans/pipeline_chain.dag", Options{Params: map[string]int64{"ranks": ranks, "chunks": chunks, "c": c}, Engine: engine})
	require.NoError(t, err)
	coll, err := p.Init(context.Background(), nil)
	require.NoError(t, err)
	defer coll.Close()
	assert.Equal(t, engine, coll.Engine())
	data := make([][]uint32, ranks)
	for r := range data {
		data[r] = make([]uint32, chunks*c)
		require.NoError(t, BindSlice(coll, r, "data", data[r]))
	}
	run := func(val uint32) {
		for i := range data[0] {
			data[0][i] = val + uint32(i)
		}
		require.NoError(t, coll.Start())
		require.NoError(t, coll.Wait(context.Background()))
	}
	run(100)
	assert.Equal(t, data[0], data[2])
	// Rank 0's data is the source of its sends (work requests), rank 2's the target of a host
	// copy: rebind both.
	old0, old2 := data[0], data[2]
	data[0], data[2] = make([]uint32, chunks*c), make([]uint32, chunks*c)
	require.NoError(t, BindSlice(coll, 0, "data", data[0]))
	require.NoError(t, BindSlice(coll, 2, "data", data[2]))
	run(500)
	assert.Equal(t, data[0], data[1], "the sends read the new memory")
	assert.Equal(t, data[0], data[2], "the new memory holds the broadcast")
	assert.Equal(t, uint32(100), old0[0], "the old memory is left alone")
	assert.Equal(t, uint32(100), old2[0], "the old memory is left alone")
	err = BindSlice(coll, 2, "data", make([]uint32, chunks*c-1))
	require.ErrorIs(t, err, ErrBind)
	assert.Contains(t, err.Error(), "pipeline_chain.dag:")

	// A buffer peers write into (the ring's data, remote_write) rebinds too: every rank is here,
	// so the peers' work requests move at once.
	ring := openRing(t, 2, 8, false)
	rc, err := ring.Init(context.Background(), nil)
	require.NoError(t, err)
	defer rc.Close()
	type celsius float32
	require.NoError(t, BindSlice(rc, 0, "data", make([]celsius, 16)), "a named element type binds as its kind")
	rd := [][]float32{make([]float32, 16), make([]float32, 16)}
	for r := range rd { // before the first start a rebind just replaces the memory
		require.NoError(t, BindSlice(rc, r, "data", rd[r]))
	}
	ringStep := func(it int) {
		want := make([]float32, 16)
		for r := range rd {
			fill(rd[r], r, it)
			p := make([]float32, 16)
			fill(p, r, it)
			for i := range want {
				want[i] += p[i]
			}
		}
		require.NoError(t, rc.Start())
		require.NoError(t, rc.Wait(context.Background()))
		assert.Equal(t, want, rd[0], "iteration %d", it)
		assert.Equal(t, want, rd[1], "iteration %d", it)
	}
	ringStep(0)
	oldRing := rd[1]
	rd[1] = make([]float32, 16)
	require.NoError(t, BindSlice(rc, 1, "data", rd[1]))
	ringStep(1)
	ringStep(2)
	fill(rd[0], 0, 0)
	assert.NotEqual(t, oldRing, rd[0], "the old memory kept iteration 0's sum")
}

// TestWorldsRebindRemote: a rank of a World rebinds a buffer its peer writes into, alone; the
// next start hands the new key to the peer and the sums stay right.
func TestWorldsRebindRemote(t *testing.T) {
	colls := initWorlds(t, openRingHang(t, 2, 8, true, 5*time.Second), 2)
	d := [][]float32{make([]float32, 16), make([]float32, 16)}
	bind := func(r int) { require.NoError(t, BindSlice(colls[r], r, "data", d[r])) }
	bind(0)
	bind(1)
	step := func(it int) {
		want := make([]float32, 16)
		for r := range d {
			fill(d[r], r, it)
			p := make([]float32, 16)
			fill(p, r, it)
			for i := range want {
				want[i] += p[i]
			}
		}
		startAll(t, colls)
		assert.Equal(t, want, d[0], "iteration %d", it)
		assert.Equal(t, want, d[1], "iteration %d", it)
	}
	step(0)
	old := append([]float32(nil), d[1]...)
	oldMem := d[1]
	d[1] = make([]float32, 16)
	bind(1)
	step(1)
	step(2)
	assert.Equal(t, old, oldMem, "nothing writes the old memory after the rebind")
}

// TestWorldSizeMismatch: a World whose size differs from the plan's ranks fails Init, before
// any collective.
func TestWorldSizeMismatch(t *testing.T) {
	p := openRing(t, 2, 8, true)
	w := chanWorlds(3)[0]
	_, err := p.Init(context.Background(), w)
	require.ErrorIs(t, err, ErrWorld)
	assert.Contains(t, err.Error(), "the world has 3 ranks (this is rank 0), plan ring_allreduce has 2")
	_, err = openRing(t, 2, 8, false).Init(context.Background(), chanWorlds(2)[0])
	require.ErrorIs(t, err, ErrArg, "softnic runs every rank in one process")
}

// TestInitContext: an Init whose ctx ended returns its cause, which the caller tells apart from
// a failing provider or world; a nil ctx is context.Background().
func TestInitContext(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("the job ends")
	cancel(cause)
	_, err := openRing(t, 2, 8, false).Init(ctx, nil)
	require.ErrorIs(t, err, cause, "compiling")
	assert.NotErrorIs(t, err, ErrProvider)
	_, err = openRing(t, 2, 8, true).Init(ctx, chanWorlds(2)[0])
	require.ErrorIs(t, err, cause, "joining the world")
	assert.NotErrorIs(t, err, ErrWorld)

	c, err := openRing(t, 2, 8, false).Init(nil, nil) // a nil ctx is allowed
	require.NoError(t, err)
	defer c.Close()
	for r := 0; r < 2; r++ {
		require.NoError(t, BindSlice(c, r, "data", make([]float32, 16)))
	}
	require.NoError(t, c.Start())
	require.NoError(t, c.Wait(nil)) // so is Wait's
}

// initWorlds inits one Coll per rank over chanWorlds, data bound.
func initWorlds(t *testing.T, p *Plan, ranks int) []*Coll {
	t.Helper()
	return initWrapped(t, p, ranks, func(w World) World { return w })
}

// initWrapped is initWorlds with each rank's World wrapped by wrap.
func initWrapped(t *testing.T, p *Plan, ranks int, wrap func(World) World) []*Coll {
	t.Helper()
	worlds := chanWorlds(ranks)
	colls := make([]*Coll, ranks)
	errs := make([]error, ranks)
	var wg sync.WaitGroup
	for r := range colls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if colls[r], errs[r] = p.Init(context.Background(), wrap(worlds[r])); errs[r] == nil {
				errs[r] = colls[r].Bind("data", make([]byte, p.graph.Buffers[0].Bytes()))
			}
		}()
	}
	wg.Wait()
	for r := range colls {
		require.NoError(t, errs[r])
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range colls {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
		wg.Wait()
	})
	return colls
}

// closeAll closes every Coll at once, as separate processes would: a Close may wait for the
// others' (Coll.Close).
func closeAll(t *testing.T, colls []*Coll) {
	t.Helper()
	errs := make([]error, len(colls))
	var wg sync.WaitGroup
	for r, c := range colls {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = c.Close() }()
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// startAll runs one iteration on every Coll.
func startAll(t *testing.T, colls []*Coll) {
	t.Helper()
	for _, c := range colls {
		require.NoError(t, c.Start())
	}
	for _, c := range colls {
		require.NoError(t, c.Wait(context.Background()))
	}
}

// TestRankNeverStarts: a peer that does not start is named by the others' Wait, within the
// hang timeout.
func TestRankNeverStarts(t *testing.T) {
	colls := initWorlds(t, openRing(t, 2, 8, true), 2)
	startAll(t, colls)
	t0 := time.Now()
	require.NoError(t, colls[0].Start())
	err := colls[0].Wait(context.Background())
	require.ErrorIs(t, err, ErrWorld)
	assert.Contains(t, err.Error(), "rank 1 did not join")
	assert.Less(t, time.Since(t0), 3*testHang)
	require.Error(t, colls[0].Start(), "a failed Coll stays failed")
}

// TestRankDiesMidStart: a peer whose CPU stops in the middle of an iteration (its NIC runs what
// was posted, its host steps never run) makes the others fail within the hang timeout, naming it.
func TestRankDiesMidStart(t *testing.T) {
	p := openRing(t, 2, 64, true)
	var freeze func(int)
	p.prov, freeze = sharedSoftNICFreeze()
	colls := initWorlds(t, p, 2)
	t.Cleanup(func() { freeze(-1) }) // before the Colls close
	startAll(t, colls)
	t0 := time.Now()
	freeze(1)
	require.NoError(t, colls[0].Start())
	require.NoError(t, colls[1].Start())
	err := colls[0].Wait(context.Background())
	require.ErrorIs(t, err, ErrTimeout)
	assert.Contains(t, err.Error(), "waits for rank 1")
	assert.Less(t, time.Since(t0), 4*testHang)
}

// TestCloseDuringStart: Close while a start is in flight (blocked on a peer) returns promptly,
// the start's Wait says it was closed, and nothing works after.
func TestCloseDuringStart(t *testing.T) {
	colls := initWorlds(t, openRing(t, 2, 8, true), 2)
	startAll(t, colls)
	require.NoError(t, colls[0].Start()) // rank 1 never starts: rank 0 waits in the barrier
	ctx, cancel := context.WithTimeout(context.Background(), testHang/8)
	err := colls[0].Wait(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "Wait's own ctx ends the wait, not the start")
	assert.Contains(t, err.Error(), "coredag: wait: context deadline exceeded: a start is in flight (it goes on")
	assert.ErrorIs(t, err, ErrBusy)
	done, err := colls[0].Test()
	require.NoError(t, err)
	require.False(t, done)
	waited := make(chan error, 1)
	go func() { waited <- colls[0].Wait(context.Background()) }()
	time.Sleep(testHang / 4)
	t0 := time.Now()
	require.NoError(t, colls[0].Close())
	assert.Less(t, time.Since(t0), testHang)
	select {
	case err := <-waited:
		require.ErrorIs(t, err, ErrClosed)
		assert.Contains(t, err.Error(), "closed during the start")
	case <-time.After(2 * testHang):
		t.Fatal("Wait did not return after Close")
	}
	require.ErrorIs(t, colls[0].Wait(context.Background()), ErrClosed, "the abandoned start stays abandoned")
	_, err = colls[0].Test()
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, colls[0].Start(), ErrClosed)
	require.ErrorIs(t, colls[0].Bind("data", make([]byte, 64)), ErrClosed)
	require.NoError(t, colls[0].Close(), "Close twice")
}

// TestOpenCheckError: a plan that fails check does not open; the error carries positions.
func TestOpenCheckError(t *testing.T) {
	src := "plan bad\nparam ranks = 2\nbuffer b f32[4]\nqueue q to (rank + 1) % ranks peer q depth 4\nop r = recv q b\n"
	_, err := OpenSource("bad.dag", []byte(src), Options{})
	var ce *CheckError
	require.ErrorAs(t, err, &ce)
	require.NotEmpty(t, ce.Diagnostics())
	assert.True(t, strings.HasPrefix(err.Error(), "bad.dag:"), "%v", err)
	_, err = OpenSource("x.dag", []byte("plan x\nparam ranks = 1\nbuffer b u8[1]\n"), Options{Provider: "nope"})
	require.ErrorIs(t, err, ErrProvider)
	_, err = OpenSource("x.dag", []byte("plan x\nparam ranks = 1\nbuffer b u8[1]\n"), Options{Extern: []string{"c"}})
	require.ErrorIs(t, err, ErrArg)
}

// TestCloseAbandons: Close with a start in flight and nobody waiting; the Wait and Test after
// it say the start was abandoned instead of reporting it done, and a hang timeout too large to
// double still lets Close stop the start.
func TestCloseAbandons(t *testing.T) {
	for _, hang := range []time.Duration{testHang, MaxHangTimeout} {
		c, err := openRingHang(t, 2, 1<<16, false, hang).Init(context.Background(), nil)
		require.NoError(t, err)
		for r := 0; r < 2; r++ {
			require.NoError(t, BindSlice(c, r, "data", make([]float32, 2<<16)))
		}
		require.NoError(t, c.Start())
		require.NoError(t, c.Close(), "hang %v", hang)
		err = c.Wait(context.Background())
		require.ErrorIs(t, err, ErrClosed, "hang %v", hang)
		assert.Contains(t, err.Error(), "the start in flight was abandoned")
		done, err := c.Test()
		assert.True(t, done)
		require.ErrorIs(t, err, ErrClosed)
	}
	_, err := OpenSource("x.dag", []byte("plan x\nparam ranks = 1\nbuffer b u8[1]\n"), Options{HangTimeout: MaxHangTimeout + 1})
	require.ErrorIs(t, err, ErrArg)
	assert.Contains(t, err.Error(), "Options.HangTimeout 24h0m0.000000001s: want 0 (the default, 10s) up to 24h0m0s")
}

// TestOpenTooLarge: Open reads at most 16 MiB of a plan file, so a device that never ends is
// refused rather than read until memory runs out.
func TestOpenTooLarge(t *testing.T) {
	_, err := Open("/dev/zero", Options{})
	require.ErrorIs(t, err, ErrArg)
	assert.Contains(t, err.Error(), "/dev/zero: larger than 16 MiB: a plan file may be at most 16 MiB")
	_, err = Open(filepath.Join(t.TempDir(), "none.dag"), Options{})
	require.ErrorIs(t, err, ErrArg)
}

// TestOpenMemory: Options.Memory bounds what opening a plan may take, and a refusal names the
// setting a library caller has (Options.Memory, C's mem option, COREDAG_MEM), not the
// command's --mem.
func TestOpenMemory(t *testing.T) {
	_, err := Open("plans/ring_allreduce.dag", Options{Memory: 1})
	var ce *CheckError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "the memory budget is 1 byte (set with Options.Memory or C's mem=): "+
		"one op needs at least 2 KiB (Options.Memory = 2048 or C's mem=2KiB)")
	assert.NotContains(t, err.Error(), "--mem")
	_, err = Open("plans/ring_allreduce.dag", Options{Memory: 1 << 30})
	require.NoError(t, err)
	_, err = Open("plans/ring_allreduce.dag", Options{Memory: -1})
	require.ErrorIs(t, err, ErrArg)

	t.Setenv("COREDAG_MEM", "1KiB")
	_, err = Open("plans/ring_allreduce.dag", Options{})
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "the memory budget is 1 KiB (set with COREDAG_MEM): one op needs at least 2 KiB (COREDAG_MEM=2KiB)")
	_, err = Open("plans/ring_allreduce.dag", Options{Memory: 1 << 30})
	require.NoError(t, err, "Options.Memory wins over COREDAG_MEM")
}

// TestSeveralInFlight: two Colls of two plans in flight at once, each on its own queues.
func TestSeveralInFlight(t *testing.T) {
	var colls []*Coll
	var data [][][]float32
	for k := 0; k < 2; k++ {
		c, err := openRing(t, 2, 8*(k+1), false).Init(context.Background(), nil)
		require.NoError(t, err)
		defer c.Close()
		d := [][]float32{make([]float32, 16*(k+1)), make([]float32, 16*(k+1))}
		for r := range d {
			fill(d[r], r, k)
			require.NoError(t, BindSlice(c, r, "data", d[r]))
		}
		colls, data = append(colls, c), append(data, d)
	}
	for _, c := range colls {
		require.NoError(t, c.Start())
	}
	for k, c := range colls {
		require.NoError(t, c.Wait(context.Background()))
		want := make([]float32, len(data[k][0]))
		for r := 0; r < 2; r++ {
			p := make([]float32, len(want))
			fill(p, r, k)
			for i := range want {
				want[i] += p[i]
			}
		}
		assert.Equal(t, want, data[k][0], fmt.Sprint("plan ", k))
		assert.Equal(t, want, data[k][1], fmt.Sprint("plan ", k))
	}
}

// TestBindPointer binds memory by address, as C callers do.
func TestBindPointer(t *testing.T) {
	colls := initWorlds(t, openRing(t, 2, 8, true), 2)
	mem := make([]float32, 16)
	fill(mem, 0, 1)
	require.NoError(t, colls[0].BindPointer("data", unsafe.Pointer(&mem[0]), 64))
	other := make([]float32, 16)
	fill(other, 1, 1)
	require.NoError(t, BindSlice(colls[1], 1, "data", other))
	startAll(t, colls)
	assert.Equal(t, other, mem)
	assert.Equal(t, float32(0*1+1+2*0+1), mem[0])
}

// f32bytes is the bytes of s.
func f32bytes(s []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s)) }

// TestOptionsExtern: Options.Extern makes a buffer the caller's in a plan that does not declare
// it extern (an MSCCL algorithm's, or an older plan's); Buffers says which are.
func TestOptionsExtern(t *testing.T) {
	src := "plan x\nparam ranks = 1\nbuffer a u8[64]\nbuffer b f64[2] extern\nbuffer c u8[8]\n"
	p, err := OpenSource("x.dag", []byte(src), Options{Extern: []string{"a"}})
	require.NoError(t, err)
	var ext []string
	for _, b := range p.Buffers() {
		if b.Extern {
			ext = append(ext, b.Name)
		}
	}
	assert.Equal(t, []string{"a", "b"}, ext)
	assert.Equal(t, BufferInfo{Name: "b", Elem: "f64", Count: 2, Bytes: 16, Extern: true, Pos: "x.dag:4:8"}, p.Buffers()[1]) // the name
	c, err := p.Init(context.Background(), nil)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, BindSlice(c, 0, "b", make([]float64, 2)))
	require.ErrorIs(t, c.Start(), ErrUnbound, "a is the caller's now")
	require.NoError(t, c.Bind("a", make([]byte, 64)))
	require.NoError(t, c.Start())
	require.NoError(t, c.Wait(context.Background()))
	require.ErrorIs(t, c.Bind("c", make([]byte, 8)), ErrBind, "c stays coredag's")
}

// TestOptionsExternWord: Options.Extern refuses the buffer of a watched word, whose waits check
// proved from the word's init (check refuses it declared extern). Before, the caller's memory was
// taken, and the first start overwrote it with the init.
func TestOptionsExternWord(t *testing.T) {
	_, err := Open("testdata/onesided/word_init.dag", Options{Extern: []string{"word"}})
	require.ErrorIs(t, err, ErrArg)
	assert.ErrorContains(t, err, "names buffer word (testdata/onesided/word_init.dag:7:8), which holds the word that wait got watches")
}

// TestStartPastLimit: the start past the most a plan allows, here a watched word that the adds of
// three starts take to the top of its u64, is refused with ErrLimit (it read as ErrProvider); a
// Coll joined anew starts over.
func TestStartPastLimit(t *testing.T) {
	p, err := Open("testdata/onesided/word_wrap_u64.dag", Options{HangTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer p.Close()
	for range 2 {
		c, err := p.Init(context.Background(), nil)
		require.NoError(t, err)
		for i := range 3 {
			require.NoError(t, c.Start(), "start %d", i+1)
			require.NoError(t, c.Wait(context.Background()), "start %d", i+1)
		}
		err = c.Start()
		require.ErrorIs(t, err, ErrLimit)
		assert.NotErrorIs(t, err, ErrProvider)
		assert.ErrorContains(t, err, "4 iterations would wrap word on rank 0")
		require.NoError(t, c.Close())
	}
}

// A Coll its caller drops without Close, Go memory bound, does not crash the process when it is
// collected (the runtime panics on a collected Pinner that still pins memory).
func TestDroppedCollDoesNotCrash(t *testing.T) {
	p := openRing(t, 2, 8, false)
	for range 3 {
		c, err := p.Init(context.Background(), nil)
		require.NoError(t, err)
		for r := range 2 {
			require.NoError(t, BindSlice(c, r, "data", make([]float32, 16)))
		}
	}
	for range 5 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStartRunsWithoutWait: a start goes on while its process neither waits nor tests (the
// background goroutine takes it), so a peer's Wait returns before this process's Wait, as
// when an application calls its own barrier between Start and Wait.
func TestStartRunsWithoutWait(t *testing.T) {
	for _, host := range []bool{false, true} {
		p := openRing(t, 2, 8, true)
		if host {
			p.prov, _ = hostSoftNIC()
		}
		colls := initWorlds(t, p, 2)
		for it := 0; it < 3; it++ {
			require.NoError(t, colls[0].Start())
			require.NoError(t, colls[1].Start())
			require.NoError(t, colls[1].Wait(context.Background()), "host progress %v, start %d", host, it)
			require.NoError(t, colls[0].Wait(context.Background()))
		}
	}
}

// TestIdleTick: while each process's Waits run its starts, a Coll's background goroutine
// wakes on its timer about once every 50 ms (exec's idleTick), not every millisecond as it does
// while it runs the starts itself (TestStartRunsWithoutWait): a tick wakes a thread, and with
// processes outnumbering cores that thread's CPU is taken from the peers.
func TestIdleTick(t *testing.T) {
	// 4,000 starts that test no hang: testHang's second ended one under load 9 to 13 on 2 cores.
	p := openRingHang(t, 2, 8, true, 10*time.Second)
	colls := initWorlds(t, p, 2)
	ticks0 := colls[0].op.Ticks()
	began := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(colls))
	for r, c := range colls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000 && errs[r] == nil; i++ {
				if errs[r] = c.Start(); errs[r] == nil {
					errs[r] = c.Wait(context.Background())
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	elapsed, ticks := time.Since(began), colls[0].op.Ticks()-ticks0
	t.Logf("%d ticks in %v", ticks, elapsed)
	assert.LessOrEqual(t, ticks, uint64(elapsed/(10*time.Millisecond))+3, "ticks in %v", elapsed)
}

// TestLongVectorPlan: the plans the sets of examples/mpi pick for long vectors
// (examples/mpi/rabenseifner_f32.dag, and its three-step variant on sockets, blocks of n) sum
// the caller's f32 arrays over 2, 4 and 8 ranks, and a start needs no World call (two-sided
// messages only), unlike the ring's.
func TestLongVectorPlan(t *testing.T) {
	const n = 13
	for _, file := range []string{"examples/mpi/rabenseifner_f32.dag", "examples/mpi/rabenseifner_merged_f32.dag"} {
		for _, ranks := range []int{2, 4, 8} {
			sumsWithoutWorld(t, file, ranks, n, int64(ranks)*n)
		}
	}
}

// TestShortVectorPlan: the plan the sets of examples/mpi pick for short vectors sums the
// caller's f32 arrays, whole, over 2 and 4 ranks, and a start needs no World call (two-sided
// messages only).
func TestShortVectorPlan(t *testing.T) {
	const n = 37
	for _, ranks := range []int{2, 4} {
		sumsWithoutWorld(t, "examples/mpi/recursive_doubling_f32.dag", ranks, n, n)
	}
}

// sumsWithoutWorld opens an f32 sum allreduce of the MPI examples with param n, checks that its
// starts need no World call, and runs three starts on fresh data of elems elements per rank,
// comparing every rank's buffer with the sum.
func sumsWithoutWorld(t *testing.T, file string, ranks int, n, elems int64) {
	t.Helper()
	p, err := Open(file, Options{Params: map[string]int64{"ranks": int64(ranks), "n": n}, HangTimeout: testHang})
	require.NoError(t, err)
	u := unfenced(p.graph)
	assert.True(t, u.Start && u.EndDone, "ranks %d: two-sided messages need no World call", ranks)
	c, err := p.Init(context.Background(), nil)
	require.NoError(t, err)
	data := make([][]float32, ranks)
	for r := range data {
		data[r] = make([]float32, elems)
		require.NoError(t, BindSlice(c, r, "data", data[r]))
	}
	for it := 0; it < 3; it++ {
		want := make([]float32, elems)
		for r := range data {
			fill(data[r], r, it)
			for i, v := range data[r] {
				want[i] += v
			}
		}
		require.NoError(t, c.Start())
		require.NoError(t, c.Wait(context.Background()))
		for r := range data {
			assert.Equal(t, want, data[r], "ranks %d rank %d iteration %d", ranks, r, it)
		}
	}
	require.NoError(t, c.Close())
}

// TestWordWaitsAcrossStarts: a wait on a memory word holds in every start, not only the first.
// Start resets no buffer, so the word grows by its adds each iteration; a wait that compared it
// with the first iteration's value let later iterations read blocks that had not landed.
func TestWordWaitsAcrossStarts(t *testing.T) {
	const ranks, n, starts = 3, 4, 4
	for _, target := range []string{"generic", "connectx"} {
		t.Run(target, func(t *testing.T) {
			p, err := Open("plans/onesided_allgather.dag", Options{Target: target, HangTimeout: 10 * time.Second,
				Params: map[string]int64{"ranks": ranks, "n": n}})
			require.NoError(t, err)
			p.prov = sharedSoftNIC()
			c, err := p.Init(context.Background(), nil)
			require.NoError(t, err)
			defer c.Close()
			mine, out := make([][]uint64, ranks), make([][]uint64, ranks)
			for r := range ranks {
				mine[r], out[r] = make([]uint64, n), make([]uint64, ranks*n)
				require.NoError(t, BindSlice(c, r, "mine", mine[r]))
				require.NoError(t, BindSlice(c, r, "out", out[r]))
			}
			for it := range starts {
				for r := range mine {
					for i := range mine[r] {
						mine[r][i] = uint64(it<<20 | r<<10 | i)
					}
					clear(out[r])
				}
				require.NoError(t, c.Start())
				require.NoError(t, c.Wait(context.Background()))
				for r := range out {
					for i, v := range out[r] {
						require.Equal(t, uint64(it<<20|(i/n)<<10|i%n), v, "start %d: out[%d] on rank %d", it, i, r)
					}
				}
			}
		})
	}
}

// gatedWorld is a World of one rank whose Allgather, once shut, ignores its ctx and waits for
// the gate to open, as a caller's World stuck in its runtime would.
type gatedWorld struct {
	shut atomic.Bool
	gate chan struct{}
}

func (w *gatedWorld) Rank() int                     { return 0 }
func (w *gatedWorld) Size() int                     { return 1 }
func (w *gatedWorld) Barrier(context.Context) error { return nil }
func (w *gatedWorld) Allgather(_ context.Context, send, recv []byte) error {
	if w.shut.Load() {
		<-w.gate
	}
	copy(recv, send)
	return nil
}

// TestCloseTwiceWaits: a Close that comes while another is still stopping the start in flight
// returns when that one does, with its result, never while bound memory may still be used.
func TestCloseTwiceWaits(t *testing.T) {
	w := &gatedWorld{gate: make(chan struct{})}
	c, err := openRing(t, 1, 8, false).Init(context.Background(), w)
	require.NoError(t, err)
	require.NoError(t, c.Bind("data", make([]byte, 8*4)))
	w.shut.Store(true)
	require.NoError(t, c.Start())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	require.ErrorIs(t, c.Wait(ctx), context.DeadlineExceeded)
	cancel()
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- c.Close() }()
	for closing := false; !closing; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		closing = c.closed
		c.mu.Unlock()
	}
	go func() { second <- c.Close() }()
	select {
	case err := <-second:
		t.Fatalf("the second Close returned (%v) while the first waited for the start", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(w.gate)
	err1, err2 := <-first, <-second
	require.Equal(t, err1, err2, "both Closes report the one close")
}

// TestPlanCloseAnyhow: Plan.Close from many goroutines at once, and on the nil Plan of an Open
// that failed, returns nil; Init after it says the plan is closed, Init on a nil Plan says so.
func TestPlanCloseAnyhow(t *testing.T) {
	p := openRing(t, 2, 8, false)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, p.Close())
		}()
	}
	wg.Wait()
	_, err := p.Init(context.Background(), nil)
	require.ErrorIs(t, err, ErrClosed)
	bad, err := Open("plans/none.dag", Options{})
	require.Error(t, err)
	require.NoError(t, bad.Close())
	_, err = bad.Init(context.Background(), nil)
	require.ErrorIs(t, err, ErrArg)
	var nc *Coll
	require.NoError(t, nc.Close())
}

// TestStartAfterCloseUnbound: Start on a closed Coll says it is closed, even before any bind.
func TestStartAfterCloseUnbound(t *testing.T) {
	c, err := openRing(t, 2, 8, false).Init(context.Background(), nil)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.Start(), ErrClosed)
}
