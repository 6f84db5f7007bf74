package coredag

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/coredag/coredag/exec/ofi"
)

// maxNets is how many of its host's IPv4 networks a rank tells the others in Init (the first
// in hostPart's order, loopback left out).
const maxNets = 8

// hostLen is the size of a rank's part of Init's allgather that says where it runs (hostPart).
const hostLen = 8 + maxNets*5

// hostPart says where this process runs: hostID, then up to maxNets IPv4 addresses of its host
// with their prefix lengths (4 bytes and 1 each; a zero prefix length ends the list), as
// interfaces lists them (none where it fails), the fastest links first (then in the host's
// order): so joinAddr prefers a cluster's fast network to its management Ethernet.
func hostPart(interfaces func() ([]ofi.Interface, error)) []byte {
	out := make([]byte, 8, hostLen)
	id := hostID()
	copy(out, id[:])
	all, _ := interfaces()
	slices.SortStableFunc(all, func(a, b ofi.Interface) int { return b.Speed - a.Speed })
	for _, f := range all {
		for _, a := range f.IPv4 {
			if len(out) < hostLen && !a.Addr().IsLoopback() && a.Bits() > 0 {
				ip := a.Addr().As4()
				out = append(append(out, ip[:]...), byte(a.Bits()))
			}
		}
	}
	return out[:hostLen] // zeros after the last network: make filled the capacity with them
}

// hostNets are the networks of a hostPart.
func hostNets(part []byte) []netip.Prefix {
	var out []netip.Prefix
	for b := part[8:]; len(b) >= 5 && b[4] != 0; b = b[5:] {
		out = append(out, netip.PrefixFrom(netip.AddrFrom4([4]byte(b[:4])), int(b[4])))
	}
	return out
}

// hostID names where this process's network lives: the kernel's boot (a host) and the network
// namespace (a container may have its own loopback). Two processes whose ids differ cannot
// reach each other's 127.0.0.1. Where the boot's id cannot be read, the host's name stands in.
func hostID() [8]byte {
	where := "boot " + ofi.BootID()
	if where == "boot " {
		if name, err := os.Hostname(); err == nil {
			where = "host " + name
		}
	}
	if ns, err := os.Readlink("/proc/self/ns/net"); err == nil { // net:[INODE]
		where += " " + ns
	}
	sum := sha256.Sum256([]byte(where))
	return [8]byte(sum[:8])
}

// joinAddr is the address rank's endpoints bind in a World whose ranks run where hosts (every
// rank's hostPart) say: "" (127.0.0.1) when they share one host; across hosts, the first
// network of rank's host (the fastest link first) that joins them all: every host has an
// address in it, each a different one (every host's default container bridge holds the same
// address, and joins nothing). Whether a network joins them is the same on every rank, so
// either every rank finds one or none does. An error when none does.
func joinAddr(rank int, hosts [][]byte) (string, error) {
	id := func(r int) uint64 { return binary.LittleEndian.Uint64(hosts[r][:8]) }
	seen := map[uint64]bool{id(rank): true}
	var others []int // the first rank of every other host
	for r := range hosts {
		if !seen[id(r)] {
			seen[id(r)] = true
			others = append(others, r)
		}
	}
	if len(others) == 0 {
		return "", nil
	}
	own := hostNets(hosts[rank])
	for _, n := range own {
		addrs := map[netip.Addr]bool{n.Addr(): true}
		for _, r := range others {
			for _, m := range hostNets(hosts[r]) {
				if m.Bits() == n.Bits() && m.Masked() == n.Masked() && !addrs[m.Addr()] {
					addrs[m.Addr()] = true
					break
				}
			}
		}
		if len(addrs) == len(others)+1 {
			return n.Addr().String(), nil
		}
	}
	var list []string
	for _, r := range others {
		list = append(list, fmt.Sprintf("rank %d's host %s", r, netsString(hostNets(hosts[r]))))
	}
	return "", fmt.Errorf("the ranks run on %d hosts (or network namespaces) and no network joins them all: this host has %s, %s; set OFIAddr (C: ofi_addr=) to the interface or IPv4 address on which each host reaches the others",
		len(others)+1, netsString(own), strings.Join(list, ", "))
}

func netsString(nets []netip.Prefix) string {
	if len(nets) == 0 {
		return "no IPv4 address but loopback"
	}
	s := make([]string, len(nets))
	for i, n := range nets {
		s[i] = n.String()
	}
	return strings.Join(s, " ")
}
