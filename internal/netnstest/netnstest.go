// Package netnstest gives tests two "hosts" on one machine: network namespaces joined by a veth
// pair, each with its own loopback and one address, as two machines on one network (or on two
// subnets behind a router) would be. It needs root and iproute2's ip; tests run it only when
// COREDAG_NETNS=1 (.ci/run sets it where namespaces can be made) and skip otherwise.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Host is one namespace: its name (for `ip netns exec`), its interface and its address.
type Host struct{ NS, Iface, IP string }

// Enabled skips t unless COREDAG_NETNS=1.
func Enabled(t *testing.T) {
	t.Helper()
	if os.Getenv("COREDAG_NETNS") != "1" {
		t.Skip("COREDAG_NETNS=1 runs it (root, ip netns)")
	}
}

// TwoHosts makes two network namespaces joined by a veth pair, removed when the test ends: their
// addresses in one network (joined), or in two routed to each other (not joined). tag tells
// apart the pairs of one test (a few letters: interface names hold 15 bytes).
func TwoHosts(t *testing.T, tag string, joined bool) [2]Host {
	t.Helper()
	id := os.Getpid() % 10000
	net := fmt.Sprintf("10.231.%d", id%250)
	other := net
	if !joined {
		other = fmt.Sprintf("10.232.%d", id%250)
	}
	hosts := [2]Host{{fmt.Sprintf("coredag-%d-%s0", id, tag), fmt.Sprintf("cd%d%s0", id, tag), net + ".1"},
		{fmt.Sprintf("coredag-%d-%s1", id, tag), fmt.Sprintf("cd%d%s1", id, tag), other + ".2"}}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	for _, h := range hosts {
		ip("netns", "add", h.NS)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", h.NS).Run() })
	}
	ip("link", "add", hosts[0].Iface, "type", "veth", "peer", "name", hosts[1].Iface)
	for _, h := range hosts {
		ip("link", "set", h.Iface, "netns", h.NS)
		ip("-n", h.NS, "addr", "add", h.IP+"/24", "dev", h.Iface)
		ip("-n", h.NS, "link", "set", h.Iface, "up")
		ip("-n", h.NS, "link", "set", "lo", "up")
	}
	if !joined { // routed to each other, as hosts on two subnets behind a router
		ip("-n", hosts[0].NS, "route", "add", other+".0/24", "dev", hosts[0].Iface)
		ip("-n", hosts[1].NS, "route", "add", net+".0/24", "dev", hosts[1].Iface)
	}
	return hosts
}
