//go:build ofi && linux

package ofi

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/nictest"
)

// TestRxMEagerLimit: tcp;ofi_rxm sends messages up to Options.RxMEagerLimit at once, past its
// 1 KiB buffers, into the posted receive (dynamic receive buffers); a message whose receive is
// posted after it arrived, and one past the limit (rendezvous), arrive whole all the same.
func TestRxMEagerLimit(t *testing.T) {
	opts := DefaultOptions()
	opts.Provider = "tcp;ofi_rxm"
	_, preset := os.LookupEnv("FI_OFI_RXM_EAGER_LIMIT")
	p, err := NewProvider(opts)
	if err != nil {
		t.Skipf("no libfabric provider tcp;ofi_rxm: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	if !preset {
		assert.Equal(t, fmt.Sprint(opts.RxMEagerLimit), os.Getenv("FI_OFI_RXM_EAGER_LIMIT"))
	}
	a, b := pair(t, p, nictest.AllAccess, 16, nil)
	max := opts.RxMEagerLimit + 4096
	src, err := a.pd.Alloc(max, nictest.AllAccess)
	require.NoError(t, err)
	dst, err := b.pd.Alloc(max, nictest.AllAccess)
	require.NoError(t, err)
	wc := make([]nic.WC, 1)
	sent := 0 // send completions seen while polling b's CQ
	poll := func(cq nic.CQ, d time.Duration) int {
		if cq == a.scq && sent > 0 {
			sent--
			return 1
		}
		n, err := cq.Poll(wc)
		for deadline := time.Now().Add(d); err == nil && n == 0 && time.Now().Before(deadline); {
			if cq != a.scq {
				var k int
				k, err = a.scq.Poll(make([]nic.WC, 1)) // the sender's side progresses too
				sent += k
			}
			if err == nil {
				n, err = cq.Poll(wc)
			}
		}
		require.NoError(t, err)
		return n
	}
	id := uint64(0)
	for _, size := range []int{4096, 100 << 10, 600 << 10, opts.RxMEagerLimit, max} {
		for _, late := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dB/late=%v", size, late), func(t *testing.T) {
				id++
				for i := range src.Bytes()[:size] {
					src.Bytes()[i] = byte(i*7) ^ byte(id)
				}
				clear(dst.Bytes())
				recv := func() {
					_, err := b.qp.PostRecv([]nic.RecvWR{{ID: id, Local: nic.SGE{Addr: dst.Addr(), Len: uint32(size), LKey: dst.LKey()}}})
					require.NoError(t, err)
				}
				if !late {
					recv()
				}
				_, err := a.qp.PostSend([]nic.SendWR{{ID: id, Op: nic.OpSend, Flags: nic.FlagSignaled,
					Local: nic.SGE{Addr: src.Addr(), Len: uint32(size), LKey: src.LKey()}}})
				require.NoError(t, err)
				if late {
					poll(b.rcq, 20*time.Millisecond) // the message arrives, unexpected
					recv()
				}
				require.Equal(t, 1, poll(b.rcq, 10*time.Second), "the receive completes")
				assert.Equal(t, nic.StatusSuccess, wc[0].Status)
				assert.EqualValues(t, size, wc[0].ByteLen)
				require.Equal(t, 1, poll(a.scq, 10*time.Second), "the send completes")
				assert.Equal(t, src.Bytes()[:size], dst.Bytes()[:size])
			})
		}
	}
}
