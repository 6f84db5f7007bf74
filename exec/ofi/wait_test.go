//go:build ofi && linux

package ofi

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/nictest"
)

// TestWaitSet: which providers give CQs a file descriptor the engines can block on, and, where
// one does (tcp;ofi_rxm), that a blocked wait wakes for a message from a peer and otherwise ends
// at its bound.
func TestWaitSet(t *testing.T) {
	for _, name := range []string{"tcp;ofi_rxm", "shm", "sockets"} {
		t.Run(name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.Provider, opts.NoBlock = name, false // wait objects where the provider has them
			p, err := NewProvider(opts)
			if err != nil {
				t.Skipf("no libfabric provider %s: %v", name, err)
			}
			t.Cleanup(func() { p.Close() })
			a, b := pair(t, p, nictest.AllAccess, 16, nil)
			ws := p.WaitSet([]nic.CQ{b.scq, b.rcq})
			if name != "tcp;ofi_rxm" {
				// libfabric 1.17: shm refuses FI_WAIT_FD, sockets gives no descriptor (README,
				// Waiting asleep); their engines poll.
				assert.Nil(t, ws, "%s gave a descriptor: update exec/ofi/README.md's table", name)
				return
			}
			require.NotNil(t, ws, "tcp;ofi_rxm grants FI_WAIT_FD")
			exchange := func(wait bool) time.Duration {
				_, err := b.qp.PostRecv([]nic.RecvWR{{ID: 7, Local: b.sge(0, 8)}})
				require.NoError(t, err)
				sent := make(chan error, 1)
				go func() {
					time.Sleep(20 * time.Millisecond) // let the receiver block first
					if _, err := a.qp.PostSend([]nic.SendWR{{ID: 1, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 8)}}); err != nil {
						sent <- err
						return
					}
					wc := make([]nic.WC, 1)
					for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
						if n, err := a.scq.Poll(wc); err != nil || n == 1 {
							sent <- err
							return
						}
					}
					sent <- assert.AnError
				}()
				start := time.Now()
				wc := make([]nic.WC, 1)
				for {
					n, err := b.rcq.Poll(wc)
					require.NoError(t, err)
					if n == 1 {
						require.Equal(t, nic.StatusSuccess, wc[0].Status)
						break
					}
					require.Less(t, time.Since(start), 20*time.Second, "no message")
					if wait {
						_, err := ws.Wait(10 * time.Second)
						require.NoError(t, err)
					}
				}
				require.NoError(t, <-sent)
				return time.Since(start)
			}
			exchange(false) // ofi_rxm connects the endpoints on the first message
			// Blocked for up to 10 s at a time, the receiver wakes for the message.
			assert.Less(t, exchange(true), 10*time.Second, "the wait did not wake for the message")

			// Nothing to come: the wait blocks, and ends at its bound.
			blocked := false
			start := time.Now()
			for i := 0; i < 100 && !blocked; i++ {
				blocked, err = ws.Wait(30 * time.Millisecond)
				require.NoError(t, err)
			}
			assert.True(t, blocked, "fi_trywait never let the wait block")
			assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
			n, err := b.rcq.Poll(make([]nic.WC, 1))
			require.NoError(t, err)
			assert.Zero(t, n)
		})
	}
	// Without wait objects (Options.NoBlock) no CQ can block.
	opts := DefaultOptions()
	opts.Provider, opts.NoBlock = "tcp;ofi_rxm", true
	if p, err := NewProvider(opts); err == nil {
		defer p.Close()
		c, err := p.OpenContext(0)
		require.NoError(t, err)
		defer c.Close()
		cq, err := c.CreateCQ(4)
		require.NoError(t, err)
		assert.Nil(t, p.WaitSet([]nic.CQ{cq}))
	}
}

// TestYieldEvery: a thread that polls and finds nothing yields the CPU once every
// Options.YieldEvery polls in a row, and never with a negative YieldEvery.
func TestYieldEvery(t *testing.T) {
	const polls = 300
	for _, tc := range []struct{ every, yields int }{{5, polls / 5}, {1, polls}, {-1, 0}} {
		t.Run(strconv.Itoa(tc.every), func(t *testing.T) {
			opts := DefaultOptions()
			opts.Provider, opts.YieldEvery = "shm", tc.every
			p, err := NewProvider(opts)
			if err != nil {
				t.Skipf("no libfabric provider shm: %v", err)
			}
			t.Cleanup(func() { p.Close() })
			_, b := pair(t, p, nictest.AllAccess, 16, nil)
			wc := make([]nic.WC, 1)
			before := p.yields.Load()
			for range polls {
				n, err := b.rcq.Poll(wc)
				require.NoError(t, err)
				require.Zero(t, n, "a CQ nothing was posted to")
			}
			assert.EqualValues(t, tc.yields, p.yields.Load()-before)
		})
	}
	p, err := NewProvider(Options{Provider: "shm"})
	if err != nil {
		t.Skipf("no libfabric provider shm: %v", err)
	}
	defer p.Close()
	assert.EqualValues(t, DefaultYieldEvery, p.yieldEvery, "0 is the default")
}
