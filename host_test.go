package coredag

import (
	"context"
	"net/netip"
	"sync"
	"testing"

	"github.com/coredag/coredag/exec/ofi"
	"github.com/stretchr/testify/require"
)

// part is a hostPart of host id with the given networks ("10.0.0.1/24").
func part(id byte, nets ...string) []byte {
	f := ofi.Interface{Name: "eth0"}
	for _, n := range nets {
		f.IPv4 = append(f.IPv4, netip.MustParsePrefix(n))
	}
	b := hostPart(func() ([]ofi.Interface, error) { return []ofi.Interface{f}, nil })
	copy(b[:8], []byte{id, 0, 0, 0, 0, 0, 0, 0})
	return b
}

// TestJoinAddr: across hosts a rank binds its first network in which every other host has an
// address of its own; one host binds nothing; no such network is an error naming each host's.
func TestJoinAddr(t *testing.T) {
	for _, c := range []struct {
		name  string
		hosts [][]byte
		rank  int
		want  string
		err   string
	}{
		{"one host", [][]byte{part(1, "10.0.0.1/24"), part(1, "10.0.0.1/24")}, 1, "", ""},
		{"two hosts", [][]byte{part(1, "10.0.0.1/24"), part(2, "10.0.0.2/24"), part(1, "10.0.0.1/24")}, 2, "10.0.0.1", ""},
		{"the shared network, not the first",
			[][]byte{part(1, "192.168.1.5/24", "10.0.0.1/16"), part(2, "192.168.7.5/24", "10.0.9.2/16")}, 1, "10.0.9.2", ""},
		{"a bridge every host has is no join",
			[][]byte{part(1, "172.17.0.1/16", "10.0.0.1/24"), part(2, "172.17.0.1/16", "10.0.0.2/24")}, 0, "10.0.0.1", ""},
		{"two hosts with one address are no join, for any of the three",
			[][]byte{part(1, "10.0.0.1/24", "10.1.0.1/24"), part(2, "10.0.0.2/24", "10.1.0.2/24"), part(3, "10.0.0.2/24", "10.1.0.3/24")}, 0, "10.1.0.1", ""},
		{"three hosts, one network joins all",
			[][]byte{part(1, "10.1.0.1/24", "10.0.0.1/24"), part(2, "10.1.0.2/24", "10.0.0.2/24"), part(3, "10.0.0.3/24")}, 0, "10.0.0.1", ""},
		{"other prefix length", [][]byte{part(1, "10.0.0.1/24"), part(2, "10.0.0.2/16")}, 0, "",
			"the ranks run on 2 hosts (or network namespaces) and no network joins them all: this host has 10.0.0.1/24, rank 1's host 10.0.0.2/16; set OFIAddr"},
		{"no network", [][]byte{part(1), part(2, "10.0.0.2/24"), part(3, "10.0.0.3/24")}, 0, "",
			"the ranks run on 3 hosts (or network namespaces) and no network joins them all: this host has no IPv4 address but loopback, rank 1's host 10.0.0.2/24, rank 2's host 10.0.0.3/24; set OFIAddr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := joinAddr(c.rank, c.hosts)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
	// A host with more networks than a part holds tells the first maxNets, loopback left out.
	var many []string
	for i := range maxNets + 2 {
		many = append(many, netip.AddrFrom4([4]byte{10, byte(i), 0, 1}).String()+"/24")
	}
	f := ofi.Interface{Name: "lo", IPv4: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}}
	g := ofi.Interface{Name: "eth0"}
	for _, n := range many {
		g.IPv4 = append(g.IPv4, netip.MustParsePrefix(n))
	}
	b := hostPart(func() ([]ofi.Interface, error) { return []ofi.Interface{f, g}, nil })
	require.Len(t, b, hostLen)
	require.Equal(t, g.IPv4[:maxNets], hostNets(b))
	// The fastest link's networks come first: IPoIB at 100 Gb/s before 1 Gb/s Ethernet, whose
	// network a link of unknown speed follows.
	eth := ofi.Interface{Name: "eth0", IPv4: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/16")}, Speed: 1000}
	ib := ofi.Interface{Name: "ib0", IPv4: []netip.Prefix{netip.MustParsePrefix("10.1.0.1/16")}, Speed: 100000}
	unknown := ofi.Interface{Name: "eth1", IPv4: []netip.Prefix{netip.MustParsePrefix("10.2.0.1/16")}}
	b = hostPart(func() ([]ofi.Interface, error) { return []ofi.Interface{unknown, eth, ib}, nil })
	require.Equal(t, []netip.Prefix{ib.IPv4[0], eth.IPv4[0], unknown.IPv4[0]}, hostNets(b))
}

// awayWorld is a World whose rank away seems to run on another host, one whose networks are
// those of this rank's host: the allgather changes the first byte of that rank's host id.
type awayWorld struct {
	World
	away int
}

func (w awayWorld) Allgather(ctx context.Context, send, recv []byte) error {
	if err := w.World.Allgather(ctx, send, recv); err != nil {
		return err
	}
	recv[(w.away+1)*len(send)-hostLen] ^= 0xff
	return nil
}

// TestInitAcrossHosts: a World whose ranks run on several hosts that no network joins (here
// both hosts hold the same addresses) is refused on every rank by a provider whose endpoints
// stay on loopback until given an address, and by shm whatever it is given; given OFIAddr it
// opens. On one host nothing is asked.
func TestInitAcrossHosts(t *testing.T) {
	for _, c := range []struct {
		name, ofiProvider, addr string
		away                    int
		err                     string
	}{
		{"one host", "", "", -1, ""},
		{"no address", "", "", 2, "coredag: world: the ranks run on 2 hosts (or network namespaces) and no network joins them all: this host has "},
		{"an address", "tcp;ofi_rxm", "eth0", 1, ""},
		{"shm", "shm", "eth0", 1, "coredag: world: the ranks run on several hosts (or network namespaces), and libfabric's shm joins the processes of one host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := openRing(t, 3, 6, true)
			p.prov.Loopback = true
			p.opts.OFIProvider, p.opts.OFIAddr = c.ofiProvider, c.addr
			worlds := chanWorlds(3)
			errs := make([]error, 3)
			colls := make([]*Coll, 3)
			var wg sync.WaitGroup
			for r := range worlds {
				w := worlds[r]
				if c.away >= 0 {
					w = awayWorld{w, c.away}
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					colls[r], errs[r] = p.Init(context.Background(), w)
				}()
			}
			wg.Wait()
			for r, err := range errs {
				if c.err == "" {
					require.NoError(t, err, "rank %d", r)
					require.NoError(t, colls[r].Close())
					continue
				}
				require.ErrorIs(t, err, ErrWorld, "rank %d", r)
				require.ErrorContains(t, err, c.err, "rank %d", r)
			}
		})
	}
}
