package coredag

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/bootstrap"
)

// World is the caller's out-of-band runtime, as UCC's OOB interface: it tells this process's
// rank and the number of ranks, and runs two collectives over all of them. Every rank calls
// them in the same order. coredag calls them from Init (to agree that every rank runs the same
// plan), from the first Start (to exchange queue and memory descriptors), from every Start
// where the plan needs it (an allgather before the iteration, so no peer's transfer reaches a
// rank that has not started it, and a barrier after, so no rank's Wait returns while a peer
// still touches its memory: docs/library.md says when each goes), and from Close where a peer may still need this process's progress (a barrier).
// The calls of a start come from the goroutine that runs it: the caller's Wait, or the Coll's
// background goroutine.
//
// A World must respect ctx (coredag bounds every call by the hang timeout) and should name the
// rank it lost in its errors: coredag passes them on, wrapped in ErrWorld.
type World interface {
	// Rank is this process's rank, 0 <= Rank < Size.
	Rank() int
	// Size is the number of ranks (processes).
	Size() int
	// Allgather gives every rank every rank's send: len(recv) == Size()*len(send), rank r's
	// bytes at recv[r*len(send):]. Every rank passes the same len(send).
	Allgather(ctx context.Context, send, recv []byte) error
	// Barrier returns once every rank has called it.
	Barrier(ctx context.Context) error
}

// BootstrapWorld joins coredag's own TCP bootstrap: the rank and size come from the launcher's
// environment (mpirun's OMPI_COMM_WORLD_RANK and _SIZE, PMI_RANK and PMI_SIZE, srun's
// SLURM_PROCID and SLURM_NTASKS); rank 0 listens on addr (HOST:PORT) and the others connect to
// it, each proving the job secret every rank holds (COREDAG_JOB_SECRET, else the job key of
// Open MPI's mpirun: see exec/bootstrap.ResolveSecret), so other users' processes cannot join. The World it returns also has a Close method (io.Closer) that drops the connections. Its
// collectives run one at a time: use it for one Coll in flight at a time (several may be open).
func BootstrapWorld(ctx context.Context, addr string) (w World, err error) {
	defer recoverInto(&err)
	rs, err := bootstrap.FromLauncher(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorld, err)
	}
	if rs.Size > 1 && addr == "" {
		return nil, fmt.Errorf("%w: %d ranks (from %s) need rank 0's address: pass BootstrapWorld HOST:PORT, rank 0's host and a free TCP port", ErrWorld, rs.Size, rs.Source)
	}
	var secret []byte
	if rs.Size > 1 {
		if secret, _, err = bootstrap.ResolveSecret("", nil); err != nil {
			return nil, fmt.Errorf("%w: job secret: %v", ErrWorld, err)
		}
		if secret == nil {
			return nil, fmt.Errorf("%w: %d ranks need a job secret that every rank holds and other users cannot read: %s", ErrWorld, rs.Size, bootstrap.NoSecretHelp)
		}
	}
	c, err := bootstrap.Connect(ctx, bootstrap.Config{World: rs, Addr: addr, Secret: secret})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorld, err)
	}
	bw := &bootWorld{c: c}
	bw.local, _ = bootstrap.LocalAddr(addr) // "" for a world of one rank, which has no address
	return bw, nil
}

// bootWorld is BootstrapWorld's World; local is the address on which this host reaches rank 0's
// bootstrap (Plan.endpointAddr binds it across hosts that no one network joins).
type bootWorld struct {
	c     *bootstrap.Comm
	local string
}

func (w *bootWorld) Rank() int                         { return w.c.Rank() }
func (w *bootWorld) Size() int                         { return w.c.Size() }
func (w *bootWorld) Barrier(ctx context.Context) error { return w.c.Barrier(ctx) }
func (w *bootWorld) Close() error                      { return w.c.Close() }

func (w *bootWorld) Allgather(ctx context.Context, send, recv []byte) error {
	all, err := w.c.AllGather(ctx, send)
	if err != nil {
		return err
	}
	if len(all) != w.Size() || len(recv) != len(all)*len(send) {
		return fmt.Errorf("allgather: %d parts for a receive buffer of %d bytes, %d from each of %d ranks", len(all), len(recv), len(send), w.Size())
	}
	for r, part := range all {
		if len(part) != len(send) {
			return fmt.Errorf("allgather: rank %d sent %d bytes, this rank %d: every rank must send as many", r, len(part), len(send))
		}
		copy(recv[r*len(send):], part)
	}
	return nil
}

// allgatherVar gives every rank every rank's data, of any length: lengths first, then the
// data padded to the longest.
func allgatherVar(ctx context.Context, w World, data []byte) ([][]byte, error) {
	n := w.Size()
	var own [8]byte
	binary.LittleEndian.PutUint64(own[:], uint64(len(data)))
	lens := make([]byte, 8*n)
	if err := w.Allgather(ctx, own[:], lens); err != nil {
		return nil, err
	}
	longest := 0
	sizes := make([]int, n)
	for r := range sizes {
		l := binary.LittleEndian.Uint64(lens[8*r:])
		if l > 1<<30 {
			return nil, fmt.Errorf("rank %d announced %d bytes of connection data: more than coredag ever sends", r, l)
		}
		sizes[r] = int(l)
		longest = max(longest, int(l))
	}
	send := make([]byte, longest)
	copy(send, data)
	recv := make([]byte, longest*n)
	if err := w.Allgather(ctx, send, recv); err != nil {
		return nil, err
	}
	out := make([][]byte, n)
	for r := range out {
		out[r] = recv[r*longest : r*longest+sizes[r]]
	}
	return out, nil
}

// exchangeOver is the exec.Options.Exchange of one rank per process, over w: every process's
// endpoint, as JSON, through allgatherVar, bounded by hang.
func exchangeOver(w World, ranks int, hang time.Duration) func(context.Context, []exec.Endpoint) ([]exec.Endpoint, error) {
	return func(ctx context.Context, local []exec.Endpoint) ([]exec.Endpoint, error) {
		ctx, cancel := context.WithTimeout(ctx, hang)
		defer cancel()
		b, err := json.Marshal(local)
		if err != nil {
			return nil, err
		}
		parts, err := allgatherVar(ctx, w, b)
		if err != nil {
			return nil, fmt.Errorf("%w: exchange of queue and memory descriptors (bounded by the hang timeout %v): %w", ErrWorld, hang, err)
		}
		all := make([]exec.Endpoint, ranks)
		for i := range all {
			all[i].Rank = -1
		}
		for proc, raw := range parts {
			var eps []exec.Endpoint
			if err := json.Unmarshal(raw, &eps); err != nil {
				return nil, fmt.Errorf("%w: rank %d sent connection data coredag cannot read: %v", ErrWorld, proc, err)
			}
			for _, ep := range eps {
				if ep.Rank < 0 || ep.Rank >= ranks || all[ep.Rank].Rank >= 0 {
					return nil, fmt.Errorf("%w: process %d sent the endpoint of rank %d, outside the plan's ranks or sent twice", ErrWorld, proc, ep.Rank)
				}
				all[ep.Rank] = ep
			}
		}
		for r := range all {
			if all[r].Rank < 0 {
				return nil, fmt.Errorf("%w: no process sent the endpoint of rank %d", ErrWorld, r)
			}
		}
		return all, nil
	}
}
