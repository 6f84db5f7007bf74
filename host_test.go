package coredag

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// awayWorld is a World whose rank away seems to run on another host: the allgather changes the
// last 8 bytes (the host's id) of that rank's part before this rank sees it.
type awayWorld struct {
	World
	away int
}

func (w awayWorld) Allgather(ctx context.Context, send, recv []byte) error {
	if err := w.World.Allgather(ctx, send, recv); err != nil {
		return err
	}
	recv[(w.away+1)*len(send)-1] ^= 0xff
	return nil
}

// TestInitAcrossHosts: a World whose ranks run on several hosts is refused, on every rank, by a
// provider whose endpoints stay on loopback until given an address (and by shm always), and
// naming the rank; given OFIAddr it opens. On one host nothing is asked.
func TestInitAcrossHosts(t *testing.T) {
	for _, c := range []struct {
		name, ofiProvider, addr string
		away                    int
		err                     string
	}{
		{"one host", "", "", -1, ""},
		{"no address", "", "", 2, "coredag: world: rank 2 runs on another host (or network namespace) than rank 0, and provider shared-softnic's endpoints bind 127.0.0.1 unless given an address: set OFIAddr (C: ofi_addr=)"},
		{"an address", "tcp;ofi_rxm", "eth0", 1, ""},
		{"shm", "shm", "eth0", 1, "coredag: world: rank 1 runs on another host (or network namespace) than rank 0, and libfabric's shm joins the processes of one host"},
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
