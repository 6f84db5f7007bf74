package exec

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/coredag/coredag/exec/nic"
)

// barrier runs opts.Barrier. With devices whose data moves only inside the host's calls
// (nic.HostProgress: libfabric with manual progress), the barrier runs on another goroutine while
// this one drives the devices' progress: a rank that finished its iteration must go on serving
// the peers' reads, atomics and writes into its memory until every rank has finished.
func (s *Session) barrier(ctx context.Context) error {
	var hp []nic.HostProgress
	for _, r := range s.res {
		if h, ok := r.dev.(nic.HostProgress); ok {
			hp = append(hp, h)
		}
	}
	if len(hp) == 0 {
		return s.opts.Barrier(ctx)
	}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil { // no caller's recover reaches this goroutine
				done <- fmt.Errorf("%w: in Options.Barrier: %v\n%s", ErrPanic, r, debug.Stack())
			}
		}()
		done <- s.opts.Barrier(ctx)
	}()
	tick := time.NewTicker(20 * time.Microsecond)
	defer tick.Stop()
	for {
		for _, h := range hp {
			if err := h.DriveProgress(); err != nil {
				return <-done // the barrier bounds itself by ctx; its error says more
			}
		}
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
	}
}
