package exec_test

import (
	"context"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
)

// TestOpWaitInline: an Op that runs every rank of the plan runs a start at Wait on the caller's
// goroutine when Wait's ctx cannot end (no hand-off to the background goroutine); a Test, or a
// Wait whose ctx can end, hands it to the background. Every way completes the iteration.
func TestOpWaitInline(t *testing.T) {
	plan, err := compileFor(exec.RingAllreduceForTest(3, 4), engineCases[0].target)
	require.NoError(t, err)
	op, err := exec.NewOp(plan, softnic.New(softnic.Options{}), exec.Options{Engine: engineCases[0].engine})
	require.NoError(t, err)
	defer op.Close()

	require.NoError(t, op.Start())
	require.NoError(t, op.Wait(context.Background()))
	assert.False(t, op.HandedForTest(), "Wait(context.Background()) ran the start inline")

	require.NoError(t, op.Start())
	for done := false; !done; {
		done, err = op.Test()
		require.NoError(t, err)
	}
	assert.True(t, op.HandedForTest(), "Test hands the start to the background")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, op.Start())
	require.NoError(t, op.Wait(ctx))
	assert.True(t, op.HandedForTest(), "a Wait whose ctx can end does not run the start inline")

	require.NoError(t, op.Start())
	require.NoError(t, op.Wait(context.Background()))
	assert.False(t, op.HandedForTest())
	assert.Equal(t, 4, op.Starts())
}

// TestOpRebindCountedRegion: on a NIC that counts remote writes per registration a counted
// region has a registration of its own, over the memory of the first start, so rebinding its
// buffer is refused (ErrRebindRemote), naming the region; a NIC that counts any part of a
// region rebinds it.
func TestOpRebindCountedRegion(t *testing.T) {
	src := `plan box
param ranks = 2
buffer mine u64[4] extern init rank + 1
buffer box  u64[4] extern remote_write
queue q to 1 - rank peer q
op put = write q mine to box
op got = wait 1 writes to box
`
	g, err := planner.Load(t.Context(), "box.dag", []byte(src), nil, planner.Options{})
	require.NoError(t, err)
	plan, err := compileFor(g, "generic")
	require.NoError(t, err)
	for _, perReg := range []bool{false, true} {
		op, err := exec.NewOp(plan, softnic.New(softnic.Options{NoCrossChannel: true, CountPerRegistration: perReg}), exec.Options{Engine: exec.Poll})
		require.NoError(t, err)
		region := func() exec.Region {
			b := make([]uint64, 4)
			return exec.Region{Addr: unsafe.Pointer(&b[0]), Len: 32}
		}
		for r := range 2 {
			require.NoError(t, op.Bind(r, 0, region()))
			require.NoError(t, op.Bind(r, 1, region()))
		}
		require.NoError(t, op.Start())
		require.NoError(t, op.Wait(context.Background()))
		err = op.Bind(0, 1, region())
		if !perReg {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, exec.ErrRebindRemote)
			assert.Contains(t, err.Error(), "a wait counts the writes that land in box, which softnic counts per registration")
		}
		require.NoError(t, op.Close())
	}
}

// TestWorldCallbackPanics: a panic in the caller's World calls (Options.Sync before a start's
// iteration, Options.Barrier after it) ends that start with ErrPanic, and the Op still closes:
// the keeper's lock, released around the call, is held again when the panic reaches the
// iteration's recover (it was not, and the process died of unlocking an unlocked mutex).
func TestWorldCallbackPanics(t *testing.T) {
	plan, err := compileFor(exec.RingAllreduceForTest(3, 4), engineCases[0].target)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		opts exec.Options
	}{
		{"sync", exec.Options{Sync: func(context.Context, uint64) (uint64, error) { panic("the World's allgather failed") }}},
		{"barrier", exec.Options{Barrier: func(context.Context) error { panic("the World's barrier failed") }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Engine = engineCases[0].engine
			op, err := exec.NewOp(plan, softnic.New(softnic.Options{}), tc.opts)
			require.NoError(t, err)
			require.NoError(t, op.Start())
			err = op.Wait(context.Background())
			require.ErrorIs(t, err, exec.ErrPanic)
			assert.Contains(t, err.Error(), "the World's")
			require.NoError(t, op.Close())
		})
	}
}

// TestRegionsMustFit: memory that cannot be a buffer's (no address, another size, an address
// not aligned to its elements) is refused where it is given, by Op.Bind and by Options.Bound,
// naming the buffer's declaration; a short region used to be registered and met as a panic
// (slice bounds out of range) in the first start. Options.Ranks naming a rank twice is refused.
func TestRegionsMustFit(t *testing.T) {
	src := `plan box
param ranks = 2
buffer d u64[4] extern init rank + 1
buffer r u64[4]
queue q to 1 - rank
op s = send q d
op v = recv q r
`
	g, err := planner.Load(t.Context(), "box.dag", []byte(src), nil, planner.Options{})
	require.NoError(t, err)
	plan, err := compileFor(g, "generic")
	require.NoError(t, err)
	mem := make([]uint64, 5)
	base := unsafe.Pointer(&mem[0])
	for _, tc := range []struct {
		region exec.Region
		want   string
	}{
		{exec.Region{Addr: base, Len: 16}, "box.dag:3:8: buffer d is 32 bytes (4 u64), the memory given is 16 bytes"},
		{exec.Region{Len: 32}, "box.dag:3:8: buffer d: no memory given"},
		{exec.Region{Addr: unsafe.Add(base, 4), Len: 32}, "box.dag:3:8: buffer d holds u64: its memory must be aligned to 8 bytes"},
	} {
		op, err := exec.NewOp(plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Poll})
		require.NoError(t, err)
		err = op.Bind(0, 0, tc.region)
		assert.ErrorContains(t, err, tc.want)
		assert.ErrorIs(t, err, exec.ErrRegion)
		require.NoError(t, op.Close())

		bound := func(int, ir.BufID) (exec.Region, bool) { return tc.region, true }
		_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Poll, Bound: bound})
		assert.ErrorContains(t, err, "rank 0: "+tc.want)
		assert.ErrorIs(t, err, exec.ErrRegion)
		assert.NotErrorIs(t, err, exec.ErrPanic)
	}
	_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Poll, Ranks: []int{1, 1}})
	assert.ErrorContains(t, err, "rank 1 is named twice in Options.Ranks")
}

// TestSliceLongerThanSGE: a transfer of one slice past a work request's 32-bit length is
// refused before any rank opens its device or allocates memory, naming the op, whichever rank
// it is on; it used to post its length modulo 4 GiB (8 bytes of 4 GiB + 8).
func TestSliceLongerThanSGE(t *testing.T) {
	src := "plan big\nparam ranks = 2\nbuffer x u64[536870913] remote_write\nqueue q to 1 - rank\nif rank == 1 { op w = write q x to x }\n"
	g, err := planner.Load(t.Context(), "big.dag", []byte(src), nil, planner.Options{})
	require.NoError(t, err)
	plan, err := compileFor(g, "generic")
	require.NoError(t, err)
	p := &countingNIC{Provider: softnic.New(softnic.Options{})}
	op, err := exec.NewOp(plan, p, exec.Options{Engine: exec.Poll})
	require.NoError(t, err)
	defer op.Close()
	require.NoError(t, op.Start())
	assert.ErrorContains(t, op.Wait(context.Background()),
		"big.dag:5:19: op w on rank 1 moves 4 GiB (4294967304 bytes) in one slice, more than a work request's 4294967295 bytes")
	assert.Zero(t, p.opened.Load(), "no rank opened its device")
}

// countingNIC counts the devices opened and closed.
type countingNIC struct {
	nic.Provider
	opened, closed atomic.Int32
}

func (p *countingNIC) Open(rank int) (nic.Context, error) {
	c, err := p.Provider.Open(rank)
	if err == nil {
		p.opened.Add(1)
		c = countedCtx{c, &p.closed}
	}
	return c, err
}

type countedCtx struct {
	nic.Context
	closed *atomic.Int32
}

func (c countedCtx) Close() error {
	c.closed.Add(1)
	return c.Context.Close()
}

// TestBoundPanicClosesDevice: a caller's Bound that panics while a rank registers its memory
// leaves no device open, that rank's included.
func TestBoundPanicClosesDevice(t *testing.T) {
	plan, err := compileFor(exec.RingAllreduceForTest(2, 4), "generic")
	require.NoError(t, err)
	p := &countingNIC{Provider: softnic.New(softnic.Options{})}
	bound := func(rank int, _ ir.BufID) (exec.Region, bool) {
		if rank == 1 {
			panic("the caller's Bound failed")
		}
		return exec.Region{}, false
	}
	require.Panics(t, func() {
		_, _ = exec.Prepare(context.Background(), plan, p, exec.Options{Engine: exec.Poll, Bound: bound})
	})
	assert.Equal(t, int32(2), p.opened.Load())
	assert.Equal(t, int32(2), p.closed.Load(), "every device opened was closed")
}

// TestNoTriggersNeedsPoll: NoTriggers concerns the polling engine; asked of a run that the
// offload engine takes (Auto on a NIC with cross-channel), it is refused rather than ignored.
func TestNoTriggersNeedsPoll(t *testing.T) {
	plan, err := compileFor(exec.RingAllreduceForTest(2, 4), "connectx")
	require.NoError(t, err)
	_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Auto, NoTriggers: true})
	assert.ErrorContains(t, err, "NoTriggers (--no-triggers) changes how the polling engine posts, and the offload engine runs this plan")
	plan, err = compileFor(exec.RingAllreduceForTest(2, 4), "generic")
	require.NoError(t, err)
	_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Auto, NoTriggers: true})
	assert.NoError(t, err, "auto takes the polling engine for a generic plan")
}
