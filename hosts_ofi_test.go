//go:build ofi && linux

package coredag

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOFIAcrossHosts runs the ring allreduce through the library with its ranks on two hosts:
// two network namespaces joined by a veth pair, each with its own loopback and one address,
// as two machines on one network would be (coredag's hostID tells them apart as it tells
// hosts apart). Ranks 0 and 2 run in the first, 1 and 3 in the second, each a process of this
// test binary (TestOFIHostRank) on coredag's own bootstrap. On tcp;ofi_rxm and sockets, with
// OFIAddr (an interface, an address) or without (Init finds the network that joins them), the
// ranks compute the sum of fresh data. Where the two hosts' addresses are in two networks routed
// to each other, every rank's Init refuses the world without OFIAddr (no network joins them
// directly) and runs it with.
//
// It needs root and `ip netns`: with COREDAG_NETNS=1 (.ci/run) it fails where it cannot make
// the namespaces; otherwise it skips.
func TestOFIAcrossHosts(t *testing.T) {
	if os.Getenv("COREDAG_NETNS") != "1" {
		t.Skip("COREDAG_NETNS=1 runs it (root, ip netns)")
	}
	joined, apart := twoHosts(t, "j", true), twoHosts(t, "s", false)
	for _, c := range []struct {
		prov   string
		ranks  int
		hosts  [2]netnsHost
		addr   string // "iface", "ip" or ""
		expect string
	}{
		{"tcp;ofi_rxm", 4, joined, "iface", "ok"},
		{"tcp;ofi_rxm", 4, joined, "", "ok"},
		{"sockets", 4, joined, "", "ok"},
		{"sockets", 2, joined, "ip", "ok"},
		{"tcp;ofi_rxm", 2, apart, "", "refused"},
		{"tcp;ofi_rxm", 2, apart, "iface", "ok"},
	} {
		t.Run(fmt.Sprintf("%s/%d ranks/%s/addr=%s", c.prov, c.ranks, c.hosts[0].ns, c.addr), func(t *testing.T) {
			var wg sync.WaitGroup
			outs := make([]string, c.ranks)
			errs := make([]error, c.ranks)
			for r := 0; r < c.ranks; r++ {
				h := c.hosts[r%2]
				env := []string{"COREDAG_HOST_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_RANK=" + strconv.Itoa(r),
					"OMPI_COMM_WORLD_SIZE=" + strconv.Itoa(c.ranks), "COREDAG_JOB_SECRET=across-hosts-test-secret-0123456789",
					"COREDAG_HOST_BOOT=" + c.hosts[0].ip + ":7700", "COREDAG_HOST_PROV=" + c.prov, "COREDAG_HOST_EXPECT=" + c.expect}
				switch c.addr {
				case "iface":
					env = append(env, "COREDAG_HOST_ADDR="+h.iface)
				case "ip":
					env = append(env, "COREDAG_HOST_ADDR="+h.ip)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
					defer cancel()
					cmd := exec.CommandContext(ctx, "ip", "netns", "exec", h.ns, os.Args[0], "-test.run=^TestOFIHostRank$", "-test.v", "-test.count=1")
					cmd.Env = append(os.Environ(), env...)
					out, err := cmd.CombinedOutput()
					outs[r], errs[r] = string(out), err
				}()
			}
			wg.Wait()
			for r := range outs {
				require.NoError(t, errs[r], "rank %d:\n%s", r, outs[r])
				require.Contains(t, outs[r], "host rank "+strconv.Itoa(r)+": "+c.expect, "rank %d:\n%s", r, outs[r])
			}
		})
	}
}

type netnsHost struct{ ns, iface, ip string }

// twoHosts makes two network namespaces joined by a veth pair, removed when the test ends: their
// addresses in one network (joined), or in two routed to each other (apart).
func twoHosts(t *testing.T, tag string, joined bool) [2]netnsHost {
	id := os.Getpid() % 10000
	net := fmt.Sprintf("10.231.%d", id%250)
	other := net
	if !joined {
		other = fmt.Sprintf("10.232.%d", id%250)
	}
	hosts := [2]netnsHost{{fmt.Sprintf("coredag-%d-%s0", id, tag), fmt.Sprintf("cd%d%s0", id, tag), net + ".1"},
		{fmt.Sprintf("coredag-%d-%s1", id, tag), fmt.Sprintf("cd%d%s1", id, tag), other + ".2"}}
	ip := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
	}
	for _, h := range hosts {
		ip("netns", "add", h.ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", h.ns).Run() })
	}
	ip("link", "add", hosts[0].iface, "type", "veth", "peer", "name", hosts[1].iface)
	for _, h := range hosts {
		ip("link", "set", h.iface, "netns", h.ns)
		ip("-n", h.ns, "addr", "add", h.ip+"/24", "dev", h.iface)
		ip("-n", h.ns, "link", "set", h.iface, "up")
		ip("-n", h.ns, "link", "set", "lo", "up")
	}
	if !joined { // routed to each other, as hosts on two subnets behind a router
		ip("-n", hosts[0].ns, "route", "add", other+".0/24", "dev", hosts[0].iface)
		ip("-n", hosts[1].ns, "route", "add", net+".0/24", "dev", hosts[1].iface)
	}
	return hosts
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
	if os.Getenv("COREDAG_HOST_EXPECT") == "refused" {
		require.ErrorIs(t, err, ErrWorld)
		require.ErrorContains(t, err, "the ranks run on 2 hosts (or network namespaces) and no network joins them all")
		t.Logf("host rank %d: refused: %v", rank, err)
		return
	}
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
