package coredag

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countWorld counts the calls into a World.
type countWorld struct {
	World
	barriers, allgathers *atomic.Int64
}

func (w countWorld) Barrier(ctx context.Context) error {
	w.barriers.Add(1)
	return w.World.Barrier(ctx)
}

func (w countWorld) Allgather(ctx context.Context, send, recv []byte) error {
	w.allgathers.Add(1)
	return w.World.Allgather(ctx, send, recv)
}

// TestWorldCallsFollowPlan: a start calls the World only for the barriers its plan needs
// (verify.Fences): none for two-sided messages, both for a write its target knows nothing of,
// the allgather alone for the ring allreduce (its writes land before their target's iteration
// ends, and the allgather tells every process when one rebound the extern buffer peers write).
// With devices moved by the host's calls (nic.HostProgress: libfabric with manual progress) the
// same holds: the ring's step ends without a barrier and its process lingers (exec's keeper)
// instead, so Close makes the one barrier that lets every peer finish its last start.
func TestWorldCallsFollowPlan(t *testing.T) {
	const starts = 20
	cases := []struct {
		name, src            string
		allgathers, barriers int64 // per start
		closing              int64 // barriers at Close, with host progress
	}{
		{"two-sided", `plan p
param ranks = 2
buffer a u64[4] extern
buffer b u64[4]
queue q to 1 - rank
op tx = send q a
op rx = recv q b
op back = copy b to a after rx, tx
`, 0, 0, 0},
		{"bare write", `plan p
param ranks = 2
buffer a u64[4] extern
buffer b u64[4] remote_write
queue q to 1 - rank
if rank == 0 { op w = write q a to b }
`, 1, 1, 0},
		{"ring", "", 1, 0, 1},
	}
	for _, host := range []bool{false, true} {
		for _, c := range cases {
			name := c.name
			if host {
				name += "/host-progress"
			}
			t.Run(name, func(t *testing.T) {
				var p *Plan
				// This test counts World calls: a hang timeout of testHang tripped once under load
				// 20 on 2 cores, and the peer's failure showed as "remote invalid request".
				const hang = 10 * time.Second
				if c.src == "" {
					p = openRingHang(t, 2, 8, true, hang)
				} else {
					var err error
					p, err = OpenSource("p.dag", []byte(c.src), Options{HangTimeout: hang})
					require.NoError(t, err)
					p.prov = sharedSoftNIC()
				}
				if host {
					p.prov, _ = hostSoftNIC()
				}
				var barriers, allgathers atomic.Int64
				worlds := chanWorlds(2)
				colls := make([]*Coll, 2)
				errs := make([]error, 2)
				var wg sync.WaitGroup
				for r := range colls {
					wg.Add(1)
					go func() {
						defer wg.Done()
						w := countWorld{worlds[r], &barriers, &allgathers}
						if colls[r], errs[r] = p.Init(context.Background(), w); errs[r] != nil {
							return
						}
						defer func() {
							if err := colls[r].Close(); errs[r] == nil {
								errs[r] = err
							}
						}()
						name := p.graph.Buffers[0].Name
						if errs[r] = colls[r].Bind(name, make([]byte, p.graph.Buffers[0].Bytes())); errs[r] != nil {
							return
						}
						for i := 0; i < starts && errs[r] == nil; i++ {
							if errs[r] = colls[r].Start(); errs[r] == nil {
								errs[r] = colls[r].Wait(context.Background())
							}
						}
					}()
				}
				wg.Wait()
				require.NoError(t, errs[0])
				require.NoError(t, errs[1])
				// Init agrees on the plan (one allgather per rank), the first start exchanges the
				// queues' descriptors (two) and keeps its start barrier (one allgather) whatever
				// the plan: every process has connected its queues.
				setup := int64(2 * 3)
				if c.allgathers == 0 {
					setup += 2
				}
				closing := int64(0)
				if host {
					closing = 2 * c.closing
				}
				assert.Equal(t, 2*starts*c.allgathers, allgathers.Load()-setup, "allgathers")
				assert.Equal(t, 2*starts*c.barriers+closing, barriers.Load(), "barriers")
			})
		}
	}
}

// TestKeeperDrivesBetweenStarts: with devices moved by the host's calls, a process whose ring
// start ended without a barrier goes on driving them while it makes no call at all (a peer may
// need that progress to complete its own start), until Close.
func TestKeeperDrivesBetweenStarts(t *testing.T) {
	p := openRing(t, 2, 8, true)
	prov, drives := hostSoftNIC()
	p.prov = prov
	colls := initWorlds(t, p, 2)
	for it := 0; it < 3; it++ {
		startAll(t, colls)
		before := drives[0].Load() + drives[1].Load()
		require.Eventually(t, func() bool { return drives[0].Load()+drives[1].Load() > before },
			5*time.Second, time.Millisecond, "start %d: nobody drives the devices after Wait", it)
	}
	closeAll(t, colls)
	after := drives[0].Load() + drives[1].Load()
	time.Sleep(20 * time.Millisecond) // the keeper ticks every millisecond
	assert.Equal(t, after, drives[0].Load()+drives[1].Load(), "the keeper drives a closed Coll's devices")
}

// TestProgressOption: Options.Progress is background or caller.
func TestProgressOption(t *testing.T) {
	_, err := Open("plans/ring_allreduce.dag", Options{Progress: "sometimes"})
	require.ErrorIs(t, err, ErrArg)
	assert.Contains(t, err.Error(), `Options.Progress "sometimes" (C: progress=sometimes): want background or caller`)
	for _, v := range []string{"", "background", "caller"} {
		_, err := Open("plans/ring_allreduce.dag", Options{Progress: v})
		require.NoError(t, err, v)
	}
}
