package ofi

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestUniverse: a verbs provider gets FI_UNIVERSE_SIZE from the plan's world size, at least 64,
// unless the environment sets it; other providers, or an unknown world size, get none.
func TestUniverse(t *testing.T) {
	unset := func(string) (string, bool) { return "", false }
	set := func(k string) (string, bool) { return "512", k == "FI_UNIVERSE_SIZE" }
	for _, c := range []struct {
		prov   string
		ranks  int
		lookup func(string) (string, bool)
		want   string
		ok     bool
	}{
		{"verbs;ofi_rxm", 4, unset, "64", true},
		{"verbs", 2, unset, "64", true},
		{"verbs;ofi_rxm", 100, unset, "100", true},
		{"verbs;ofi_rxm", 4, set, "", false},
		{"verbs;ofi_rxm", 0, unset, "", false},
		{"tcp;ofi_rxm", 4, unset, "", false},
		{"shm", 4, unset, "", false},
		{"", 4, unset, "", false},
	} {
		o := DefaultOptions()
		o.Provider, o.Ranks = c.prov, c.ranks
		got, ok := o.Universe(c.lookup)
		if got != c.want || ok != c.ok {
			t.Errorf("%q at %d ranks: got %q, %v; want %q, %v", c.prov, c.ranks, got, ok, c.want, c.ok)
		}
	}
}

// TestSocketsBuffers: the sockets provider gets 4 MiB socket buffers where the kernel allows
// both a receive and a send buffer that large, a size Options sets, or none: when the
// environment sets one, for another provider, or when Options says to leave the kernel's.
func TestSocketsBuffers(t *testing.T) {
	unset := func(string) (string, bool) { return "", false }
	set := func(k string) (string, bool) { return "65536", k == "FI_SOCKETS_MAX_BUF_SZ" }
	limits := func(r, w int) func(string) (int, bool) {
		return func(name string) (int, bool) {
			switch name {
			case "rmem_max":
				return r, r > 0
			case "wmem_max":
				return w, w > 0
			}
			return 0, false
		}
	}
	big, small := limits(4<<20, 8<<20), limits(212992, 212992)
	for _, c := range []struct {
		name   string
		prov   string
		size   int
		lookup func(string) (string, bool)
		limit  func(string) (int, bool)
		want   string
		ok     bool
	}{
		{"sockets, large limits", "sockets", 0, unset, big, "4194304", true},
		{"picked provider, large limits", "", 0, unset, big, "4194304", true},
		{"the kernel's default limits", "sockets", 0, unset, small, "", false},
		{"a large receive limit only", "sockets", 0, unset, limits(8<<20, 212992), "", false},
		{"limits unknown", "sockets", 0, unset, limits(0, 0), "", false},
		{"the environment's own", "sockets", 0, set, big, "", false},
		{"another provider", "tcp;ofi_rxm", 0, unset, big, "", false},
		{"shm", "shm", 0, unset, big, "", false},
		{"a size from Options", "sockets", 1 << 20, unset, small, "1048576", true},
		{"Options: the kernel's", "sockets", -1, unset, big, "", false},
	} {
		o := DefaultOptions()
		o.Provider, o.SocketsBufSize = c.prov, c.size
		got, ok := o.SocketsBuffers(c.lookup, c.limit)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %q, %v; want %q, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestSHMCopies: a named shm provider moves messages by segments (FI_SHM_DISABLE_CMA=1) where
// one CMA copy costs more than 2.5 copies, else as libfabric does; the environment's own
// setting wins, and other providers get none.
func TestSHMCopies(t *testing.T) {
	unset := func(string) (string, bool) { return "", false }
	set := func(k string) (string, bool) { return "0", k == "FI_SHM_DISABLE_CMA" }
	cost := func(c float64, ok bool) func() (float64, bool) { return func() (float64, bool) { return c, ok } }
	for _, c := range []struct {
		prov   string
		lookup func(string) (string, bool)
		cost   func() (float64, bool)
		want   string
		ok     bool
	}{
		{"shm", unset, cost(4.1, true), "1", true},
		{"shm", unset, cost(1.3, true), "", false},
		{"shm", unset, cost(2.4, true), "", false},
		{"shm", unset, cost(2.5, true), "", false},
		{"shm", unset, cost(2.6, true), "1", true},
		{"shm", unset, cost(0, false), "", false},
		{"shm", set, cost(4.1, true), "", false},
		{"tcp;ofi_rxm", unset, cost(4.1, true), "", false},
		{"", unset, cost(4.1, true), "", false},
	} {
		o := DefaultOptions()
		o.Provider = c.prov
		got, ok := o.SHMCopies(c.lookup, c.cost)
		if got != c.want || ok != c.ok {
			t.Errorf("%q: got %q, %v; want %q, %v", c.prov, got, ok, c.want, c.ok)
		}
	}
}

// TestEnvTrue reads libfabric's booleans as libfabric does.
func TestEnvTrue(t *testing.T) {
	for v, want := range map[string]bool{"1": true, "on": true, "TRUE": true, " yes ": true, "0": false, "off": false, "": false, "2": false} {
		if got := envTrue(v); got != want {
			t.Errorf("envTrue(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestBind: Options.Addr resolves to the address endpoints bind and its interface, from an
// address or an interface name; what the host does not have is refused with what it has.
func TestBind(t *testing.T) {
	host := func() ([]Interface, error) {
		return []Interface{{Name: "lo", IPv4: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
			{Name: "eth0", IPv4: []netip.Prefix{netip.MustParsePrefix("10.1.2.3/24"), netip.MustParsePrefix("10.1.2.4/16")}}, {Name: "ib0"}}, nil
	}
	for _, c := range []struct {
		addr, ip, iface, err string
	}{
		{"", "127.0.0.1", "lo", ""},
		{"eth0", "10.1.2.3", "eth0", ""},
		{"10.1.2.4", "10.1.2.4", "eth0", ""},
		{"::ffff:10.1.2.3", "10.1.2.3", "eth0", ""},
		{"127.0.0.1", "127.0.0.1", "lo", ""},
		{"10.9.9.9", "", "", "ofi: address 10.9.9.9: no interface of this host has it (this host has lo 127.0.0.1/8, eth0 10.1.2.3/24, eth0 10.1.2.4/16)"},
		{"ib0", "", "", "ofi: interface ib0 has no IPv4 address (this host has lo 127.0.0.1/8, eth0 10.1.2.3/24, eth0 10.1.2.4/16)"},
		{"fe80::1", "", "", "ofi: address fe80::1 is IPv6: coredag carries IPv4 endpoint addresses only (16 bytes)"},
		{"eth9", "", "", `ofi: "eth9" is neither an IPv4 address nor an interface of this host`},
	} {
		ip, iface, err := Options{Addr: c.addr}.Bind(host)
		if c.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), c.err) {
				t.Errorf("Bind(%q) = %q, %q, %v; want an error starting %q", c.addr, ip, iface, err, c.err)
			}
			continue
		}
		if err != nil || ip != c.ip || iface != c.iface {
			t.Errorf("Bind(%q) = %q, %q, %v; want %q, %q", c.addr, ip, iface, err, c.ip, c.iface)
		}
	}
	_, _, err := Options{Addr: "eth0"}.Bind(func() ([]Interface, error) { return nil, errors.New("no netlink") })
	if err == nil || !strings.Contains(err.Error(), "no netlink") {
		t.Errorf("Bind with a failing interface list: %v", err)
	}
}
