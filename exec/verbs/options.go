// Package verbs is coredag's NIC provider for real RDMA devices, a thin cgo layer over libibverbs.
//
// It implements nic.Provider for RC queue pairs on InfiniBand and RoCE devices (RoCE v2 GIDs are
// preferred): send/recv, RDMA write, write with immediate, read, fetch-add and compare-swap, inline
// sends, batched posting (the work request list is built in C on the C stack and handed to one
// ibv_post_send per batch of up to 64) and batched polling. Memory regions live outside the Go heap
// (posix_memalign), so the NIC may DMA into them while the garbage collector runs.
//
// Upstream rdma-core has no cross-channel work requests, so Caps.CrossChannel is false and
// CQE_WAIT, SEND_EN, RECV_EN and managed queues are refused: on verbs devices plans run under the
// polling engine. NOP is posted as a zero-length RDMA WRITE, which touches no memory and completes
// in queue order.
//
// The provider needs cgo, Linux and libibverbs (Debian/Ubuntu: libibverbs-dev to build,
// ibverbs-providers to run) and the build tag "verbs":
//
//	go build -tags verbs ./cmd/coredag
//
// Without the tag the package still compiles, and New returns an error that says how to rebuild.
// Multi-process runs exchange QPInfo and nic.RemoteMR values through package exec/bootstrap.
package verbs

import "errors"

// AutoGID asks New to pick the GID table entry itself: the first RoCE v2 entry holding an
// IPv4-mapped address, else the first RoCE v2 entry, else entry 0.
const AutoGID = -1

// Options choose the device and port a provider drives.
type Options struct {
	// Device is the verbs device name, e.g. "mlx5_0" or "rxe0" (ibv_devices lists them). Empty
	// means the first device found.
	Device string
	// Port is the device port (1-based); 0 means port 1.
	Port int
	// GIDIndex is the GID table entry used for RoCE addressing (show_gids lists them), or AutoGID.
	// Ignored on InfiniBand ports, which address by LID. DefaultOptions sets AutoGID; note that
	// the zero value 0 names entry 0.
	GIDIndex int
	// Ranks limits the ranks Open accepts, for runs with one process per rank (Ranks = {R}). Nil
	// lets one process open any number of ranks, each with its own device context.
	Ranks []int
	// Idle says what polling an empty CQ does: spin, or yield the CPU. IdleAuto yields on software
	// devices (Soft-RoCE, Soft-iWARP), whose kernel threads need the CPU the poller spins on, and
	// spins on hardware.
	Idle Idle
}

// Idle is the behaviour of a poll that finds no completion.
type Idle uint8

// Idle behaviours.
const (
	IdleAuto  Idle = iota // yield on software devices, spin on hardware
	IdleSpin              // always spin
	IdleYield             // after a few empty polls in a row, sched_yield on each empty poll
)

// DefaultOptions returns the first device, port 1, automatic GID selection, any rank.
func DefaultOptions() Options {
	return Options{Port: 1, GIDIndex: AutoGID}
}

// ErrNotBuilt is returned by New in binaries built without the verbs build tag.
var ErrNotBuilt = errors.New("this coredag was built without RDMA verbs support: rebuild with `go build -tags verbs` (the C library: scripts/build-lib.sh, which adds it where libibverbs' headers are) on Linux with cgo enabled and libibverbs installed (Debian/Ubuntu: apt-get install libibverbs-dev ibverbs-providers)")
