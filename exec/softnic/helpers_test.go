package softnic

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

// end is one rank's side of a test connection: a PD, a QP with its own send and receive CQs, and
// one registered buffer.
type end struct {
	ctx      nic.Context
	pd       nic.PD
	scq, rcq nic.CQ
	qp       nic.QP
	mr       nic.MR
}

// pair builds ranks 0 and 1 of sn, connected by one RC QP each, with a 4 KiB buffer of the given
// access on each side.
func pair(t testing.TB, sn *NIC, access nic.Access, cfg nic.QPConfig) (a, b *end) {
	t.Helper()
	a, b = newEnd(t, sn, 0, access, cfg), newEnd(t, sn, 1, access, cfg)
	require.NoError(t, a.qp.Connect(b.qp.Info()))
	require.NoError(t, b.qp.Connect(a.qp.Info()))
	return a, b
}

func newEnd(t testing.TB, sn *NIC, rank int, access nic.Access, cfg nic.QPConfig) *end {
	t.Helper()
	e := &end{}
	var err error
	e.ctx, err = sn.Open(rank)
	require.NoError(t, err)
	e.pd, err = e.ctx.AllocPD()
	require.NoError(t, err)
	e.scq, err = e.ctx.CreateCQ(256)
	require.NoError(t, err)
	e.rcq, err = e.ctx.CreateCQ(256)
	require.NoError(t, err)
	e.mr, err = e.pd.AllocMR(4096, access)
	require.NoError(t, err)
	cfg.SendCQ, cfg.RecvCQ = e.scq, e.rcq
	if cfg.SendDepth == 0 {
		cfg.SendDepth = 64
	}
	if cfg.RecvDepth == 0 {
		cfg.RecvDepth = 64
	}
	e.qp, err = e.pd.CreateQP(cfg)
	require.NoError(t, err)
	return e
}

// sge names n bytes at offset off of the end's buffer.
func (e *end) sge(off, n int) nic.SGE {
	return nic.SGE{Addr: e.mr.Addr() + uint64(off), Len: uint32(n), LKey: e.mr.LKey()}
}

// remote names offset off of the end's buffer for a peer.
func (e *end) remote(off int) (uint64, uint32) { return e.mr.Addr() + uint64(off), e.mr.RKey() }

// drain polls cq until it has produced want completions or polling stops bringing any.
func drain(t testing.TB, cq nic.CQ, want int) []nic.WC {
	t.Helper()
	var out []nic.WC
	buf := make([]nic.WC, 16)
	for idle := 0; len(out) < want && idle < 3; {
		n, err := cq.Poll(buf)
		require.NoError(t, err)
		if n == 0 {
			idle++
		}
		out = append(out, buf[:n]...)
	}
	return out
}

func postSend(t testing.TB, e *end, wrs ...nic.SendWR) {
	t.Helper()
	n, err := e.qp.PostSend(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)
}

func postRecv(t testing.TB, e *end, wrs ...nic.RecvWR) {
	t.Helper()
	n, err := e.qp.PostRecv(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)
}
