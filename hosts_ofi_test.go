//go:build ofi && linux

package coredag

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coredag/coredag/internal/netnstest"
	"github.com/stretchr/testify/require"
)

// TestOFIAcrossHosts runs the ring allreduce through the library with its ranks on two hosts:
// two network namespaces joined by a veth pair, each with its own loopback and one address,
// as two machines on one network would be (coredag's hostID tells them apart as it tells
// hosts apart; internal/netnstest). Ranks 0 and 2 run in the first, 1 and 3 in the second,
// each a process of this test binary (TestOFIHostRank) on coredag's own bootstrap. On
// tcp;ofi_rxm and sockets, with OFIAddr (an interface, an address) or without (Init finds the
// network that joins them; on two subnets routed to each other, where none does, the address
// on which each host reaches rank 0's bootstrap), the ranks compute the sum of fresh data.
// TestInitAcrossHosts has the refusals.
func TestOFIAcrossHosts(t *testing.T) {
	netnstest.Enabled(t)
	joined, apart := netnstest.TwoHosts(t, "j", true), netnstest.TwoHosts(t, "s", false)
	for _, c := range []struct {
		prov  string
		ranks int
		hosts [2]netnstest.Host
		addr  string // "iface", "ip" or ""
	}{
		{"tcp;ofi_rxm", 4, joined, "iface"},
		{"tcp;ofi_rxm", 4, joined, ""},
		{"sockets", 4, joined, ""},
		{"sockets", 2, joined, "ip"},
		{"tcp;ofi_rxm", 2, apart, ""},
		{"tcp;ofi_rxm", 2, apart, "iface"},
	} {
		t.Run(fmt.Sprintf("%s/%d ranks/%s/addr=%s", c.prov, c.ranks, c.hosts[0].NS, c.addr), func(t *testing.T) {
			var wg sync.WaitGroup
			outs := make([]string, c.ranks)
			errs := make([]error, c.ranks)
			for r := 0; r < c.ranks; r++ {
				h := c.hosts[r%2]
				env := []string{"COREDAG_HOST_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_RANK=" + strconv.Itoa(r),
					"OMPI_COMM_WORLD_SIZE=" + strconv.Itoa(c.ranks), "COREDAG_JOB_SECRET=across-hosts-test-secret-0123456789",
					"COREDAG_HOST_BOOT=" + c.hosts[0].IP + ":7700", "COREDAG_HOST_PROV=" + c.prov}
				switch c.addr {
				case "iface":
					env = append(env, "COREDAG_HOST_ADDR="+h.Iface)
				case "ip":
					env = append(env, "COREDAG_HOST_ADDR="+h.IP)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
					defer cancel()
					cmd := exec.CommandContext(ctx, "ip", "netns", "exec", h.NS, os.Args[0], "-test.run=^TestOFIHostRank$", "-test.v", "-test.count=1")
					cmd.Env = append(os.Environ(), env...)
					out, err := cmd.CombinedOutput()
					outs[r], errs[r] = string(out), err
				}()
			}
			wg.Wait()
			for r := range outs {
				require.NoError(t, errs[r], "rank %d:\n%s", r, outs[r])
				require.Contains(t, outs[r], "host rank "+strconv.Itoa(r)+": ok", "rank %d:\n%s", r, outs[r])
			}
		})
	}
}

// TestOFIHostRank is one rank of TestOFIAcrossHosts, run in its namespace (COREDAG_HOST_RANK).
func TestOFIHostRank(t *testing.T) {
	rank, err := strconv.Atoi(os.Getenv("COREDAG_HOST_RANK"))
	if err != nil {
		t.Skip("a rank of TestOFIAcrossHosts")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := BootstrapWorld(ctx, os.Getenv("COREDAG_HOST_BOOT"))
	require.NoError(t, err)
	defer w.(interface{ Close() error }).Close()
	const n, iters = 64, 20
	ranks := w.Size()
	p, err := Open("plans/ring_allreduce.dag", Options{Params: map[string]int64{"ranks": int64(ranks), "n": n},
		Provider: "ofi", OFIProvider: os.Getenv("COREDAG_HOST_PROV"), OFIAddr: os.Getenv("COREDAG_HOST_ADDR"),
		HangTimeout: 20 * time.Second})
	require.NoError(t, err)
	defer p.Close()
	c, err := p.Init(ctx, w)
	require.NoError(t, err)
	defer c.Close()
	data, x, want := make([]float32, ranks*n), make([]float32, ranks*n), make([]float32, ranks*n)
	require.NoError(t, BindSlice(c, rank, "data", data))
	for it := 0; it < iters; it++ {
		clear(want)
		for r := 0; r < ranks; r++ {
			fill(x, r, it)
			for i := range want {
				want[i] += x[i]
			}
		}
		fill(data, rank, it)
		require.NoError(t, c.Start())
		require.NoError(t, c.Wait(ctx))
		require.Equal(t, want, data, "iteration %d", it)
	}
	t.Logf("host rank %d: ok: %d iterations on %s, OFIAddr %q", rank, iters, os.Getenv("COREDAG_HOST_PROV"), p.opts.OFIAddr)
}
