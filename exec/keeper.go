package exec

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredag/coredag/exec/nic"
)

// keeper moves the data of a persistent operation's devices whose data moves only inside the
// host's calls (nic.HostProgress: libfabric with manual progress) while no iteration polls them:
// between a step and the next, and during a step's World calls.
//
// Why an Op needs it. A step of a plan whose one-sided ops land before their target's iteration
// ends (Unfenced.EndLanded) may end without the World barrier: no peer touches this process's
// memory once its iteration ended. But such an op may still owe its completion at the initiator
// to this process's progress (the target's provider acknowledges it), and a process whose Wait
// returned makes no libfabric calls until its next Start: a peer waiting for that completion
// would wait as long, or for ever if the application meanwhile waits for that peer (an
// MPI_Barrier). So from the end of such a step the Op lingers: the keeper drives the devices
// every lingerTick until the next step's start allgather (Options.Sync) returns, which proves
// every process finished the previous step (each calls it only after its previous step
// completed), or until the hang timeout passed (a peer that needs more is past its own). The
// common case pays nothing on the critical path: no World barrier, no goroutine per step, and a
// World call made on the iteration's own thread.
//
// mu is held by whoever drives the devices: an iteration (it lets go during World calls), a
// rebind, and the keeper's tick, which only tries.
type keeper struct {
	mu    sync.Mutex
	hp    []nic.HostProgress
	base  time.Time
	until atomic.Int64 // lingering until this time (ns since base); 0: not lingering
}

// lingerTick is how often the keeper drives the devices while lingering. The Go runtime sleeps
// at least a millisecond for a shorter timer when nothing else runs, so asking for less would
// not make it more often.
const lingerTick = time.Millisecond

func (k *keeper) now() int64 { return int64(time.Since(k.base)) }

// linger starts (or extends) lingering for d; a d past the clock's range lingers until the
// range's end.
func (k *keeper) linger(d time.Duration) {
	if len(k.hp) > 0 {
		now := k.now()
		k.until.Store(now + min(int64(d), math.MaxInt64-now))
	}
}

// outside runs f, a World call, with mu released, and takes mu back however f ends: a panic
// in the caller's World goes on to the iteration's recover with mu held, as the iteration's
// deferred unlock wants.
func (k *keeper) outside(f func()) {
	k.mu.Unlock()
	defer k.mu.Lock()
	f()
}

// settle ends lingering: no peer needs this process's progress any more.
func (k *keeper) settle() { k.until.Store(0) }

// lingering reports whether a peer may still need this process's progress.
func (k *keeper) lingering() bool {
	u := k.until.Load()
	return u != 0 && k.now() < u
}

// tick drives every device once if lingering and nobody else holds them. It reports whether
// the keeper should go on ticking.
func (k *keeper) tick() bool {
	if !k.lingering() {
		return false
	}
	if k.mu.TryLock() {
		for _, h := range k.hp {
			_ = h.DriveProgress() // a closed device: the step or Close that closed it reports it
		}
		k.mu.Unlock()
	}
	return true
}
