//go:build ofi && linux

package ofi

import (
	"encoding/binary"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/nictest"
)

// The tests run on libfabric's sockets provider on loopback (FI_SOCKETS_IFACE=lo, endpoints on
// 127.0.0.1). They skip if libfabric has no sockets provider.

func provider(t *testing.T) *Provider { return providerNamed(t, "sockets") }

// providerNamed opens libfabric provider name with the default options. It skips the test where
// libfabric does not offer it (outside CI=1); a provider libfabric lists but coredag cannot open
// fails the test.
func providerNamed(t *testing.T, name string) *Provider {
	t.Helper()
	opts := DefaultOptions()
	opts.Provider = name
	p, err := NewProvider(opts)
	if err != nil {
		if !Listed(name) && os.Getenv("CI") != "1" {
			t.Skipf("no libfabric %s provider: %v", name, err)
		}
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type end struct {
	ctx      *Context
	pd       *PD
	mr       *MR
	scq, rcq nic.CQ
	qp       *QP
}

func (e *end) nictest() nictest.End {
	return nictest.End{Ctx: e.ctx, PD: e.pd, QP: e.qp, SCQ: e.scq, RCQ: e.rcq, MR: e.mr}
}

func (e *end) sge(off, n int) nic.SGE {
	return nic.SGE{Addr: e.mr.Addr() + uint64(off), Len: uint32(n), LKey: e.mr.LKey()}
}

// pair opens ranks 0 and 1 (a domain each) and connects one endpoint between them; binds[i] are
// bound to rank i's endpoint, on counters that open(rank's context) returns.
func pair(t *testing.T, p *Provider, acc nic.Access, depth int, binds func(rank int, c *Context) []Bind) (*end, *end) {
	t.Helper()
	mk := func(rank int, acc nic.Access) *end {
		c, err := p.OpenContext(rank)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, c.Close()) })
		e := &end{ctx: c}
		e.pd, err = c.PD()
		require.NoError(t, err)
		e.mr, err = e.pd.Alloc(4096, acc)
		require.NoError(t, err)
		e.scq, err = c.CreateCQ(depth)
		require.NoError(t, err)
		e.rcq, err = c.CreateCQ(depth)
		require.NoError(t, err)
		var b []Bind
		if binds != nil {
			b = binds(rank, c)
		}
		e.qp, err = e.pd.CreateEndpoint(nic.QPConfig{SendCQ: e.scq, RecvCQ: e.rcq, SendDepth: depth, RecvDepth: depth,
			MaxInline: p.Caps().MaxInline}, b...)
		require.NoError(t, err)
		return e
	}
	a, b := mk(0, nictest.AllAccess), mk(1, acc)
	require.NoError(t, a.qp.Connect(b.qp.Info()))
	require.NoError(t, b.qp.Connect(a.qp.Info()))
	return a, b
}

// countedPair is pair with a counter of events ev bound to rank's endpoint.
func countedPair(t *testing.T, p *Provider, rank int, ev Event) (*end, *end, *Counter) {
	t.Helper()
	var k *Counter
	a, b := pair(t, p, nictest.AllAccess, 16, func(r int, c *Context) []Bind {
		if r != rank {
			return nil
		}
		var err error
		k, err = c.OpenCounter()
		require.NoError(t, err)
		return []Bind{{Cntr: k, Events: ev}}
	})
	return a, b, k
}

func TestProvider(t *testing.T) {
	p := provider(t)
	t.Logf("%v: caps %+v, mr_mode %#x, FI_TRIGGER %v", p, p.Caps(), p.MRMode(), p.Triggered())
	assert.False(t, p.Caps().CrossChannel)
	assert.Greater(t, p.Caps().MaxQPDepth, 0)
	a, _ := pair(t, p, nictest.AllAccess, 8, nil)
	info := a.qp.Info()
	assert.Equal(t, []byte{127}, info.GID[4:5], "the endpoint is bound on loopback: %v", info.GID)
}

func TestDefaultProvider(t *testing.T) {
	p, err := NewProvider(DefaultOptions())
	if err != nil {
		t.Skipf("no provider with FI_TRIGGER and FI_RMA: %v", err)
	}
	defer p.Close()
	t.Logf("default: %v", p)
	assert.True(t, p.Triggered())
}

// TestCMACost: process_vm_readv works on the process's own memory (as shm's does on a peer's),
// and its cost in copies is a positive figure.
func TestCMACost(t *testing.T) {
	c, ok := CMACost()
	require.True(t, ok, "process_vm_readv of this process's own memory failed")
	t.Logf("one CMA copy of 256 KiB costs %.2f copies (shm copies by segments above %g)", c, cmaLimit)
	assert.Greater(t, c, 0.0)
}

// TestContract holds the provider to package nic's contract, except where RDM endpoints differ
// from RC queue pairs (skipped with the reason).
func TestContract(t *testing.T) {
	p := provider(t)
	nictest.Contract(t, p.Caps(), func(t *testing.T, c nictest.PairConfig) (nictest.End, nictest.End) {
		if strings.HasSuffix(t.Name(), "/Flush") {
			t.Skip("an RDM endpoint has no error state: requests posted behind a failed one have already " +
				"run when it fails (only requests posted after the failure is seen are flushed)")
		}
		depth := c.Depth
		if depth == 0 {
			depth = 64
		}
		a, b := pair(t, p, c.Access, depth, nil)
		return a.nictest(), b.nictest()
	})
}

func TestAtomics(t *testing.T) {
	p := provider(t)
	if !p.Caps().Atomics {
		t.Skip("no FI_ATOMIC")
	}
	a, b := pair(t, p, nictest.AllAccess, 16, nil)
	rb := b.mr.Remote()
	binary.LittleEndian.PutUint64(b.mr.Bytes()[64:], 40)
	_, err := a.qp.PostSend([]nic.SendWR{
		{ID: 1, Op: nic.OpAtomicFAdd, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: rb.Addr + 64, RKey: rb.RKey, CompareAdd: 2},
		{ID: 2, Op: nic.OpAtomicCAS, Flags: nic.FlagSignaled, Local: a.sge(8, 8), RemoteAddr: rb.Addr + 64, RKey: rb.RKey, CompareAdd: 42, Swap: 7},
	})
	require.NoError(t, err)
	wcs := nictest.Wait(t, a.scq, 2)
	for _, wc := range wcs {
		assert.Equal(t, nic.StatusSuccess, wc.Status, "%+v: %s", wc, a.qp.Explain())
	}
	assert.EqualValues(t, 40, binary.LittleEndian.Uint64(a.mr.Bytes()[0:]))
	assert.EqualValues(t, 42, binary.LittleEndian.Uint64(a.mr.Bytes()[8:]))
	assert.EqualValues(t, 7, binary.LittleEndian.Uint64(b.mr.Bytes()[64:]))
}

// TestTriggeredWrite: a write triggered when a counter of sends reaches 2 goes only after the
// second send completed.
func TestTriggeredWrite(t *testing.T) {
	p := provider(t)
	if !p.Triggered() {
		t.Skip("no FI_TRIGGER")
	}
	a, b, sends := countedPair(t, p, 0, EvSend)
	rb := b.mr.Remote()
	binary.LittleEndian.PutUint64(a.mr.Bytes()[256:], 0x5eed)
	require.NoError(t, a.qp.PostTriggered(sends, 2, nic.SendWR{ID: 9, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled,
		Local: a.sge(256, 8), RemoteAddr: rb.Addr + 512, RKey: rb.RKey}))
	_, err := b.qp.PostRecv([]nic.RecvWR{{ID: 1}, {ID: 2}})
	require.NoError(t, err)

	_, err = a.qp.PostSend([]nic.SendWR{{ID: 1, Op: nic.OpSend}})
	require.NoError(t, err)
	nictest.Wait(t, b.rcq, 1)
	require.NoError(t, sends.Wait(1, 5*time.Second))
	// Give a wrongly fired write time to land: it must not.
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		var wc [4]nic.WC
		n, err := a.scq.Poll(wc[:])
		require.NoError(t, err)
		require.Zero(t, n, "nothing completes before the second send: %+v", wc[:n])
		time.Sleep(5 * time.Millisecond)
	}
	assert.Zero(t, binary.LittleEndian.Uint64(b.mr.Bytes()[512:]), "one send done: the write has not gone")

	_, err = a.qp.PostSend([]nic.SendWR{{ID: 2, Op: nic.OpSend, Flags: nic.FlagSignaled}})
	require.NoError(t, err)
	nictest.Wait(t, b.rcq, 1)
	wcs := nictest.Wait(t, a.scq, 2)
	assert.EqualValues(t, 9, wcs[0].ID, "the triggered write holds its place in the send queue")
	assert.EqualValues(t, 2, wcs[1].ID)
	for _, wc := range wcs {
		assert.Equal(t, nic.StatusSuccess, wc.Status, "%+v: %s", wc, a.qp.Explain())
	}
	assert.EqualValues(t, 0x5eed, binary.LittleEndian.Uint64(b.mr.Bytes()[512:]), "the triggered write landed")
	assert.EqualValues(t, 2, sends.Read())
	assert.Zero(t, sends.ReadErr())
}

// TestRemoteWriteCounter: a counter bound for FI_REMOTE_WRITE counts writes into the target.
func TestRemoteWriteCounter(t *testing.T) {
	p := provider(t)
	a, b, rw := countedPair(t, p, 1, EvRemoteWrite)
	rb := b.mr.Remote()
	_, err := a.qp.PostSend([]nic.SendWR{
		{ID: 1, Op: nic.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: rb.Addr, RKey: rb.RKey},
		{ID: 2, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: rb.Addr + 8, RKey: rb.RKey},
	})
	require.NoError(t, err)
	nictest.Wait(t, a.scq, 1)
	if err := rw.Wait(2, 5*time.Second); err != nil {
		t.Skipf("remote write events are not counted (FI_RMA_EVENT): %v", err)
	}
	assert.EqualValues(t, 2, rw.Read())
}

// TestCounterWork: deferred work adds to a counter when another reaches its threshold, and not
// before; Wait times out below the threshold.
func TestCounterWork(t *testing.T) {
	p := provider(t)
	c, err := p.OpenContext(0)
	require.NoError(t, err)
	defer c.Close()
	trig, err := c.OpenCounter()
	require.NoError(t, err)
	target, err := c.OpenCounter()
	require.NoError(t, err)
	_, err = c.QueueCounterWork(trig, 3, target, 5, false, nil)
	require.NoError(t, err)
	require.NoError(t, trig.Add(2))
	assert.ErrorIs(t, target.Wait(5, 50*time.Millisecond), ErrTimeout, "threshold not reached: no work")
	assert.Zero(t, target.Read())
	require.NoError(t, trig.Add(1))
	require.NoError(t, target.Wait(5, 5*time.Second), "the work ran at the threshold")
	assert.EqualValues(t, 5, target.Read())

	_, err = c.QueueCounterWork(trig, 4, target, 100, true, nil)
	require.NoError(t, err)
	require.NoError(t, trig.Set(4))
	require.NoError(t, target.Wait(100, 5*time.Second), "a set at its threshold")
	assert.EqualValues(t, 100, target.Read())
}

// TestDeeperThanProvider: queues deeper than the endpoint's libfabric queues (256 transmit and
// receive operations on sockets). 300 notified writes (600 transmit operations) and 300 receives
// posted at once, then 300 triggered writes armed at once on a counter the receives raise: every
// request completes, in posting order, and the data lands.
func TestDeeperThanProvider(t *testing.T) {
	p := provider(t)
	const n = 300
	a, b := pair(t, p, nictest.AllAccess, n, nil)
	require.Greater(t, 2*n, int(p.ccaps.tx_size), "the test must overflow the provider's queues")
	rb := b.mr.Remote()
	recvs := make([]nic.RecvWR, n)
	for i := range recvs {
		recvs[i] = nic.RecvWR{ID: uint64(1000 + i)}
	}
	k, err := b.qp.PostRecv(recvs)
	require.NoError(t, err)
	require.Equal(t, n, k)
	writes := make([]nic.SendWR, n)
	for i := range writes {
		binary.LittleEndian.PutUint64(a.mr.Bytes()[8*(i%64):], uint64(i))
		writes[i] = nic.SendWR{ID: uint64(i), Op: nic.OpRDMAWriteImm, Imm: uint32(i), Flags: nic.FlagSignaled,
			Local: a.sge(8*(i%64), 8), RemoteAddr: rb.Addr + uint64(8*(i%64)), RKey: rb.RKey}
	}
	k, err = a.qp.PostSend(writes)
	require.NoError(t, err)
	require.Equal(t, n, k)
	// What a hang's diagnosis would add now: the first write and receive libfabric has not
	// taken, and why.
	held := nic.Stall{Rank: 0, QPN: a.qp.Num(), Op: nic.OpRDMAWriteImm, Reason: nic.StallWriteFirst}
	if p.sendAfterWrite() { // each write with immediate takes two of the provider's entries
		busy := uint64(a.qp.txCap / 2 * 2)
		held.Index, held.ID, held.Reason, held.Reached, held.Awaited = busy/2, busy/2, nic.StallProviderFull, busy, uint64(a.qp.txCap)
	}
	assert.Equal(t, []nic.Stall{held}, a.ctx.Stalls())
	if rx := uint64(b.qp.rxCap); rx < n {
		assert.Equal(t, []nic.Stall{{Rank: 1, QPN: b.qp.Num(), Recv: true, Index: rx, ID: 1000 + rx, Op: nic.OpRecv,
			Reason: nic.StallProviderFull, Reached: rx, Awaited: rx}}, b.ctx.Stalls())
	}
	// The writes beyond the first 128 go to libfabric as the sender's completions make room,
	// which its CQ's polls collect: poll both sides, as the engines do.
	var sent, got []nic.WC
	buf := make([]nic.WC, 16)
	for deadline := time.Now().Add(10 * time.Second); len(sent) < n || len(got) < n; {
		require.False(t, time.Now().After(deadline), "%d of %d writes and %d of %d notifications after 10 s", len(sent), n, len(got), n)
		k, err := a.scq.Poll(buf)
		require.NoError(t, err)
		sent = append(sent, buf[:k]...)
		k, err = b.rcq.Poll(buf)
		require.NoError(t, err)
		got = append(got, buf[:k]...)
	}
	for i := range n {
		require.Equal(t, uint64(1000+i), got[i].ID)
		require.Equal(t, uint32(i), got[i].Imm, "notifications arrive in posting order")
		require.Equal(t, uint64(i), sent[i].ID)
		require.Equal(t, nic.StatusSuccess, sent[i].Status, a.qp.Explain())
	}

	// Triggered writes back, each at its own threshold of a counter of b's receive completions.
	cnt, err := b.ctx.CreateCounter()
	require.NoError(t, err)
	ra := a.mr.Remote()
	for i := range n {
		require.NoError(t, b.ctx.Trigger(cnt, uint64(i+1), &nic.TriggeredWR{Kind: nic.TrigSend, QP: b.qp,
			Send: nic.SendWR{ID: uint64(i), Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: b.sge(0, 8),
				RemoteAddr: ra.Addr + 1024, RKey: ra.RKey}}))
	}
	require.Equal(t, n, b.ctx.PendingTriggers())
	require.NoError(t, cnt.Add(n))
	for i, wc := range nictest.Wait(t, b.scq, n) {
		require.Equal(t, uint64(i), wc.ID)
		require.Equal(t, nic.StatusSuccess, wc.Status, b.qp.Explain())
	}
	require.Zero(t, b.ctx.PendingTriggers())
}

// A memory region's descriptor is the provider's opaque key (sockets gives small integers such
// as 0x11): held in a Go pointer type, it crashed the collector's stack scan ("bad pointer in
// frame"). Go keeps it as an integer (and shim.h's ofi_seg does too).
func TestDescriptorIsNotAPointer(t *testing.T) {
	f, ok := reflect.TypeFor[MR]().FieldByName("desc")
	require.True(t, ok)
	switch f.Type.Kind() {
	case reflect.Pointer, reflect.UnsafePointer:
		t.Errorf("MR.desc is a %s: a descriptor must be held as an integer", f.Type)
	}
}
