//go:build verbs && linux

package verbs

import (
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/coredag/coredag/exec/nic"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestRawPingPong bounces a notified write between two ranks of this process with no engine in
// between: the provider's own per-hop latency, a floor for the engine's figure.
func TestRawPingPong(t *testing.T) {
	p := provider(t)
	a, b := pairDepth(t, p, nic.AccessLocalWrite|nic.AccessRemoteWrite, 0, 1024)
	const hops = 1000
	side := func(me, peer *end, first bool, done chan<- error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		// One CPU per side, as the multi-process runs pin one rank per CPU.
		var set unix.CPUSet
		set.Set(me.ctx.Rank() % runtime.NumCPU())
		unix.SchedSetaffinity(0, &set)
		rb := peer.mem.Remote()
		recv := make([]nic.RecvWR, hops/2)
		for i := range recv {
			recv[i] = nic.RecvWR{ID: uint64(i)}
		}
		if _, err := me.qp.PostRecv(recv); err != nil {
			done <- err
			return
		}
		wr := []nic.SendWR{{Op: nic.OpRDMAWriteImm, Flags: nic.FlagSignaled, Local: sge(me.mem, 0, 8), RemoteAddr: rb.Addr, RKey: rb.RKey}}
		wc := make([]nic.WC, 16)
		turn := first
		deadline := time.Now().Add(30 * time.Second)
		for sent, got := 0, 0; sent+got < hops/2*2 || false; {
			if turn {
				if _, err := me.qp.PostSend(wr); err != nil {
					done <- err
					return
				}
				sent++
				turn = false
				continue
			}
			n, err := me.rcq.Poll(wc)
			if err != nil {
				done <- err
				return
			}
			if n > 0 {
				got += n
				turn = sent < hops/2
			}
			if k, _ := me.scq.Poll(wc); k > 0 && wc[0].Status != nic.StatusSuccess {
				done <- fmt.Errorf("write failed: %v", wc[0].Status)
				return
			}
			if time.Now().After(deadline) {
				done <- fmt.Errorf("stuck after %d sent, %d received", sent, got)
				return
			}
		}
		done <- nil
	}
	var per []float64
	for range 3 {
		done := make(chan error, 2)
		start := time.Now()
		go side(a, b, true, done)
		go side(b, a, false, done)
		require.NoError(t, <-done)
		require.NoError(t, <-done)
		per = append(per, float64(time.Since(start).Microseconds())/hops)
	}
	sort.Float64s(per)
	fmt.Printf("RAWPINGPONG per-hop %.2f us\n", per[len(per)/2])
}
