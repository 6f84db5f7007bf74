// Package ofi is coredag's NIC provider on libfabric (OpenFabrics Interfaces), a cgo layer over
// libfabric's reliable-datagram endpoints (FI_EP_RDM).
//
// A nic.QP is an RDM endpoint plus the peer's address in the context's address vector: sends and
// receives are FI_MSG operations, RDMA writes and reads FI_RMA operations, fetch-add and
// compare-swap FI_ATOMIC operations (if the provider has them). Each rank's Context is a libfabric
// domain with its own address vector, so memory keys, completion queues and counters of one rank
// are never valid on another. The package also exposes libfabric's counters, triggered operations
// and deferred counter work (Counter, QP.PostTriggered, Context.QueueCounterWork), shaped like
// libfabric's calls.
//
// The provider needs cgo, Linux and libfabric (Debian/Ubuntu: libfabric-dev to build, libfabric1
// to run; libfabric-bin has fi_info and fi_pingpong) and the build tag "ofi":
//
//	go build -tags ofi ./cmd/coredag
//
// Without the tag the package still compiles, and New returns an error that says how to rebuild.
// Endpoints of providers over IP bind 127.0.0.1 unless Options.Addr names another address, which
// ranks on several hosts need; README.md says what works and what does not.
package ofi

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// Options choose the libfabric provider.
type Options struct {
	// Provider is a libfabric provider name such as "sockets" or "tcp" (fi_info lists them). Empty
	// means the first provider that offers reliable datagram endpoints with FI_MSG, FI_RMA and
	// FI_TRIGGER. A named provider need not offer FI_TRIGGER (PostTriggered then fails).
	Provider string
	// Addr is where the endpoints of a provider over IP (sockets, tcp;ofi_rxm, verbs;ofi_rxm)
	// bind: an IPv4 address of this host, or the name of a network interface, whose first IPv4
	// address is taken. Empty means 127.0.0.1: the traffic stays on loopback, and every rank must
	// run on this host. Ranks on several hosts each give their own host's address on the network
	// that joins them (Bind). shm ignores it. The sockets provider also reads the interface from
	// FI_SOCKETS_IFACE, which New sets to Addr's interface before libfabric starts; libfabric
	// reads its environment once, so the first provider a process opens sets it.
	Addr string
	// AutoProgress asks for libfabric's automatic data progress (FI_PROGRESS_AUTO: sockets runs a
	// progress thread per domain). False (DefaultOptions) asks for FI_PROGRESS_MANUAL: no
	// progress thread; the engine's CQ polls move the data, and Context.DriveProgress moves it
	// while the engine waits for something else. On sockets over loopback manual progress cut a
	// ping-pong hop from milliseconds to tens of microseconds (README.md). A provider that only
	// has automatic progress is used as it is.
	AutoProgress bool
	// PEWaitTime is FI_SOCKETS_PE_WAITTIME, how many milliseconds the sockets provider's progress
	// thread (AutoProgress) spins waiting for work before it sleeps. Negative leaves libfabric's
	// default; 0 (what DefaultOptions sets) makes the thread sleep at once.
	PEWaitTime int
	// RxMBufferSize is FI_OFI_RXM_BUFFER_SIZE, the eager message size of the ofi_rxm utility
	// provider (tcp;ofi_rxm, verbs;ofi_rxm), set in the process environment before libfabric
	// starts unless the environment already sets it. ofi_rxm allocates 1,024 receive and 1,024
	// transmit buffers of that size per endpoint, and coredag opens an endpoint per queue: at
	// libfabric's 16 KiB a 4-rank ring took 700 MB and 16 s to start on this machine, at 1 KiB
	// 100 MB and 4 s. Larger messages go in segments or by rendezvous. 0 or negative leaves
	// libfabric's default; DefaultOptions sets 1024.
	RxMBufferSize int
	// RxMEagerLimit is FI_OFI_RXM_EAGER_LIMIT, the largest message ofi_rxm sends at once rather
	// than by rendezvous (a request, then the data: a round trip more), set in the process
	// environment before libfabric starts unless the environment already sets it. Over tcp
	// (tcp;ofi_rxm, which receives into the posted buffer directly: dynamic receive buffers) it
	// may exceed RxMBufferSize and costs no memory: a message that finds its receive posted
	// lands in it, as coredag's receives are posted at the start; one that does not is held in
	// memory allocated for it. verbs;ofi_rxm ignores it (its eager size is RxMBufferSize). 0 or
	// negative leaves libfabric's default (RxMBufferSize); DefaultOptions sets 16 MiB
	// (README.md, Network).
	RxMEagerLimit int
	// SocketsBufSize is FI_SOCKETS_MAX_BUF_SZ, the send and receive buffer size the sockets
	// provider gives its connections (SO_SNDBUF, SO_RCVBUF), set in the process environment before
	// libfabric starts unless the environment already sets it. 0 lets SocketsBuffers decide from
	// the kernel's limits; negative leaves libfabric's default, the kernel's autotuning.
	SocketsBufSize int
	// Order is the message ordering asked of the provider first, as libfabric's FI_ORDER_* bits
	// (msg_order); when no provider grants it, coredag asks for send-after-send alone, which it
	// needs to match messages with receives. Some providers grant an ordering only when asked
	// (shm: send-after-write), and Caps().Order says what was granted. DefaultOptions asks for
	// send-after-send and send-after-write (a write with immediate is then a write and a message
	// posted together); a plan that relies on more adds it (provider.Config.Order).
	Order uint64
	// NoAtomics says the ops the provider will post use no remote atomics: Order is then asked
	// for before FI_ATOMIC, which is kept only where the provider grants both. tcp;ofi_rxm grants
	// atomics only without send-after-write, so by default (atomics first) it drops the ordering
	// and each write with immediate waits for the write's delivery before its message goes.
	NoAtomics bool
	// NoBlock opens CQs without a wait object, so engines poll them while they wait, yielding
	// the CPU every YieldEvery idle polls, instead of sleeping in the kernel after a short spin
	// (Provider.WaitSet). Only providers that grant a file descriptor wait object block at all:
	// tcp;ofi_rxm does, shm and sockets do not (README.md). DefaultOptions sets it: with 4
	// processes on 2 cores, a tcp;ofi_rxm rank that polls and yields finished the MPI bench's
	// 4 KiB and 64 KiB allreduce a fifth sooner than one that slept in poll(2), whose wakeup
	// waits for the scheduler (README.md, Waiting asleep).
	NoBlock bool
	// YieldEvery is how many polls of the provider's CQs in a row may find nothing before the
	// polling thread yields the CPU (sched_yield), and again after as many more: with manual
	// progress nobody sleeps in the kernel, so a peer process that shares its core runs only
	// when the poller yields or its time slice ends. 0 means DefaultYieldEvery; negative never
	// yields.
	YieldEvery int
	// Ranks is the world size of the plan the provider runs (0: unknown). On a verbs provider
	// it sets FI_UNIVERSE_SIZE when the environment does not (Universe).
	Ranks int
}

// cmaLimit is the cost of one CMA copy, in copies of the same bytes, above which shm is told
// to move messages by segments. A segmented message is copied twice, a CMA one once after its
// pages are pinned, so the break-even would be two copies, but segments also need both
// processes running at once, which where ranks outnumber cores costs the large messages. On
// the 2-core AMD VM (CMA about 4 copies) segments won at every size from 64 KiB to 16 MiB by a
// third or more; on the 2-core Xeon (1.8 to 2.2 measured alone, up to 2.4 with four processes
// measuring at once) CMA won from 1 MiB up by 10 to 17% and lost 14% at 64 and 256 KiB
// (README.md, Shared memory copies). The limit sits between the two, above the Xeon's spread,
// so that its runs do not flip between the two from one to the next.
const cmaLimit = 2.5

// SHMCopies returns the FI_SHM_DISABLE_CMA to set, and false when none is. shm moves a message
// it does not inject (over 4 KiB) either by cross-memory attach (CMA: the receiver copies it out
// of the sender's memory with process_vm_readv, libfabric's default) or by segments (SAR: the
// sender copies it into shared memory, the receiver out of it; no system call). The
// environment's own setting wins (lookup); only a named shm provider gets one: 1 (segments)
// where cost (CMACost) says one CMA copy costs more than cmaLimit copies (README.md, Shared
// memory copies).
func (o Options) SHMCopies(lookup func(string) (string, bool), cost func() (float64, bool)) (string, bool) {
	if _, set := lookup("FI_SHM_DISABLE_CMA"); set || o.Provider != "shm" {
		return "", false
	}
	if c, ok := cost(); ok && c > cmaLimit {
		return "1", true
	}
	return "", false
}

// envTrue reads a boolean of libfabric's environment as libfabric does (fi_param_get_bool).
func envTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "on", "true", "yes":
		return true
	}
	return false
}

// socketsBuf is the buffer size SocketsBuffers picks for the sockets provider where the kernel
// lets a socket's buffers be that large. With the kernel's autotuning a message of exactly
// 65,536 B took far longer on loopback than its neighbours, and fixed buffers removed the step;
// where the kernel caps a socket's buffers at its default (212,992 B), fixed buffers hold large
// messages back, so there the buffers stay the kernel's (README.md, Network, has the figures).
const socketsBuf = 4 << 20

// SocketsBuffers returns the FI_SOCKETS_MAX_BUF_SZ to set, and false when none is: the
// environment's own wins (lookup); only the sockets provider, named or picked (Provider empty),
// gets one; a positive SocketsBufSize is set as it is; 0 sets 4 MiB when the kernel's limits on
// a socket's receive and send buffers (limit: net.core.rmem_max, wmem_max) are at least that.
func (o Options) SocketsBuffers(lookup func(string) (string, bool), limit func(name string) (int, bool)) (string, bool) {
	if _, set := lookup("FI_SOCKETS_MAX_BUF_SZ"); set || o.SocketsBufSize < 0 {
		return "", false
	}
	if o.Provider != "" && o.Provider != "sockets" {
		return "", false
	}
	if o.SocketsBufSize > 0 {
		return strconv.Itoa(o.SocketsBufSize), true
	}
	for _, name := range []string{"rmem_max", "wmem_max"} {
		if n, ok := limit(name); !ok || n < socketsBuf {
			return "", false
		}
	}
	return strconv.Itoa(socketsBuf), true
}

// netCoreLimit reads /proc/sys/net/core/NAME, a kernel limit such as rmem_max; false when it
// cannot (another system, or no such file).
func netCoreLimit(name string) (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/core/" + name)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// DefaultYieldEvery is YieldEvery's default: about once per round of an engine that waits on
// a few CQs. Measured in scripts/mpi-bench.sh (4 processes on 2 cores) against yielding after
// 1 us of idle polls, which shm and tcp;ofi_rxm reached only at their 8th idle poll, it cut the
// time of the 8 B to 64 KiB allreduce on both; yielding on every idle poll was slower again, and
// sockets came out even from 3 to 8. Where a rank polled four CQs a round (128 KiB to 1 MiB) it
// was behind, until the plan there polled two (README.md, Waiting).
const DefaultYieldEvery = 3

// minUniverse is the least FI_UNIVERSE_SIZE Universe sets: what scripts/vm-test.sh runs
// Soft-RoCE with.
const minUniverse = 64

// Universe returns the FI_UNIVERSE_SIZE to set in the environment before libfabric starts, and
// false when none is: the environment's own (lookup) wins, and only a verbs provider (verbs,
// verbs;ofi_rxm) gets one. ofi_rxm sizes each endpoint's verbs CQ as its message queues' sizes
// times the universe size, (128 + 128) x 256 = 65,536 entries at libfabric's default, past
// Soft-RoCE's (rxe) max_cqe of 32,767: every endpoint then fails ("Unable to create verbs CQ").
// The universe is the most peers a process talks to, at most the plan's world size; Universe
// gives the world size, at least 64, which fits rxe up to 128 ranks and is never less than the
// ranks a plan has; when the world size is unknown, libfabric's default stays.
func (o Options) Universe(lookup func(string) (string, bool)) (string, bool) {
	if _, set := lookup("FI_UNIVERSE_SIZE"); set || !strings.Contains(o.Provider, "verbs") {
		return "", false
	}
	if o.Ranks <= 0 {
		return "", false
	}
	return strconv.Itoa(max(o.Ranks, minUniverse)), true
}

// Bind resolves Addr: the IPv4 address endpoints bind and the interface that holds it ("lo" and
// 127.0.0.1 when Addr is empty). interfaces lists the host's interfaces and their addresses
// (HostInterfaces; tests pass their own). An address no interface holds, an interface without
// an IPv4 address or an unknown name is an error that lists what the host has.
func (o Options) Bind(interfaces func() ([]Interface, error)) (ip, iface string, err error) {
	if o.Addr == "" {
		return "127.0.0.1", "lo", nil
	}
	all, err := interfaces()
	if err != nil {
		return "", "", fmt.Errorf("ofi: address %q: listing the network interfaces: %v", o.Addr, err)
	}
	if addr, err := netip.ParseAddr(o.Addr); err == nil {
		if !addr.Unmap().Is4() {
			return "", "", fmt.Errorf("ofi: address %s is IPv6: coredag carries IPv4 endpoint addresses only (16 bytes); give an IPv4 address or an interface (%s)", o.Addr, listAddrs(all))
		}
		for _, f := range all {
			for _, a := range f.IPv4 {
				if a.Addr() == addr.Unmap() {
					return a.Addr().String(), f.Name, nil
				}
			}
		}
		return "", "", fmt.Errorf("ofi: address %s: no interface of this host has it (%s)", o.Addr, listAddrs(all))
	}
	for _, f := range all {
		if f.Name == o.Addr {
			if len(f.IPv4) == 0 {
				return "", "", fmt.Errorf("ofi: interface %s has no IPv4 address (%s)", o.Addr, listAddrs(all))
			}
			return f.IPv4[0].Addr().String(), f.Name, nil
		}
	}
	return "", "", fmt.Errorf("ofi: %q is neither an IPv4 address nor an interface of this host (%s)", o.Addr, listAddrs(all))
}

// Interface is a network interface, its IPv4 addresses with their networks' prefix lengths, in
// the host's order, and its link speed.
type Interface struct {
	Name  string
	IPv4  []netip.Prefix
	Speed int // Mb/s as the kernel reports it (/sys/class/net/NAME/speed); 0: unknown
}

// listAddrs says what interfaces and addresses a host has, for an error: "this host has lo
// 127.0.0.1/8, eth0 10.1.2.3/24".
func listAddrs(all []Interface) string {
	var have []string
	for _, f := range all {
		for _, a := range f.IPv4 {
			have = append(have, f.Name+" "+a.String())
		}
	}
	if len(have) == 0 {
		return "this host has no IPv4 address"
	}
	return "this host has " + strings.Join(have, ", ")
}

// BootID is the kernel's id of this boot (a host until it reboots), "" where it cannot be read.
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// HostInterfaces lists this host's interfaces and their IPv4 addresses (Options.Bind).
func HostInterfaces() ([]Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]Interface, 0, len(ifs))
	for _, f := range ifs {
		addrs, err := f.Addrs()
		if err != nil {
			return nil, err
		}
		i := Interface{Name: f.Name}
		if b, err := os.ReadFile("/sys/class/net/" + f.Name + "/speed"); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
				i.Speed = n
			}
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || n.IP.To4() == nil {
				continue
			}
			ones, _ := n.Mask.Size()
			if ones > 32 { // an IPv4 address given a 16-byte mask
				ones -= 96
			}
			ip, _ := netip.AddrFromSlice(n.IP.To4())
			i.IPv4 = append(i.IPv4, netip.PrefixFrom(ip, ones))
		}
		out = append(out, i)
	}
	return out, nil
}

// The FI_ORDER_* bits DefaultOptions asks for (libfabric's values).
const (
	orderSAW = 1 << 7 // FI_ORDER_SAW
	orderSAS = 1 << 8 // FI_ORDER_SAS
)

// DefaultOptions returns the first provider with triggered operations, on loopback, with manual
// progress, asking for send-after-send and send-after-write ordering, with CQs that are polled
// (NoBlock).
func DefaultOptions() Options {
	return Options{PEWaitTime: 0, RxMBufferSize: 1024, RxMEagerLimit: 16 << 20, Order: orderSAS | orderSAW, NoBlock: true}
}

// ErrNotBuilt is returned by New in binaries built without the ofi build tag.
var ErrNotBuilt = errors.New("this coredag was built without libfabric support: rebuild with `go build -tags ofi` on Linux with cgo enabled and libfabric installed (Debian/Ubuntu: apt-get install libfabric-dev)")
