package coredag

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/bootstrap"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/provider"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/planner/elaborate"
)

// panicNIC panics when a rank is opened, as a buggy provider would.
type panicNIC struct{ nic.Provider }

func (panicNIC) Open(int) (nic.Context, error) { panic("boom in Open") }

// TestPanicsAreErrors: a panic inside coredag, in the caller's goroutine or in the background
// iteration, comes back as an ErrInternal error.
func TestPanicsAreErrors(t *testing.T) {
	p := openRing(t, 2, 8, false)
	p.prov = provider.Entry{Name: "panicky", AllRanks: true, Open: func(provider.Config) (nic.Provider, error) { panic("boom in the table") }}
	_, err := p.Init(context.Background(), nil)
	require.ErrorIs(t, err, ErrInternal)
	assert.Contains(t, err.Error(), "boom in the table")

	p.prov = provider.Entry{Name: "panicky", AllRanks: true,
		Open: func(provider.Config) (nic.Provider, error) { return panicNIC{softnic.New(softnic.Options{})}, nil }}
	c, err := p.Init(context.Background(), nil)
	require.NoError(t, err)
	defer c.Close()
	for r := 0; r < 2; r++ {
		require.NoError(t, BindSlice(c, r, "data", make([]float32, 16)))
	}
	require.NoError(t, c.Start())
	done, err := false, error(nil)
	for deadline := time.Now().Add(5 * time.Second); !done && time.Now().Before(deadline); {
		done, err = c.Test()
	}
	require.True(t, done)
	require.ErrorIs(t, err, ErrInternal)
	assert.Contains(t, err.Error(), "boom in Open")
	require.ErrorIs(t, c.Start(), ErrInternal, "the Coll stays failed")
}

// stuckNIC is a provider whose rank 1 cannot release its device context.
type stuckNIC struct{ nic.Provider }

func (p stuckNIC) Open(rank int) (nic.Context, error) {
	c, err := p.Provider.Open(rank)
	if err != nil || rank != 1 {
		return c, err
	}
	return stuckCtx{c}, nil
}

type stuckCtx struct{ nic.Context }

func (c stuckCtx) Close() error {
	_ = c.Context.Close()
	return errors.New("the device is stuck")
}

// TestCloseProviderFails: what the provider fails to release at Close is the provider's error
// (ErrProvider), naming the rank and the object, not a bug of coredag's (ErrInternal).
func TestCloseProviderFails(t *testing.T) {
	p := openRing(t, 2, 8, false)
	p.prov = provider.Entry{Name: "stuck", AllRanks: true,
		Open: func(provider.Config) (nic.Provider, error) { return stuckNIC{softnic.New(softnic.Options{})}, nil }}
	c, err := p.Init(context.Background(), nil)
	require.NoError(t, err)
	for r := 0; r < 2; r++ {
		require.NoError(t, BindSlice(c, r, "data", make([]float32, 16)))
	}
	require.NoError(t, c.Start())
	require.NoError(t, c.Wait(context.Background()))
	err = c.Close()
	require.ErrorIs(t, err, ErrProvider)
	assert.NotErrorIs(t, err, ErrInternal)
	assert.Contains(t, err.Error(), "rank 1: closing the device context: the device is stuck")
	assert.Equal(t, err, c.Close(), "a second Close returns the first one's result")
}

// panicWorld is a World whose calls panic once armed, as a caller's buggy World would.
type panicWorld struct {
	World
	armed *atomic.Bool
}

func (w panicWorld) Allgather(ctx context.Context, send, recv []byte) error {
	if w.armed.Load() {
		panic("the caller's allgather failed")
	}
	return w.World.Allgather(ctx, send, recv)
}

// TestWorldPanics: a panic in the caller's World during a start comes back from Wait as
// ErrInternal, and the Coll closes; it used to end the process (the runtime's lock, released
// around the World call, was unlocked a second time on the panic's way out).
func TestWorldPanics(t *testing.T) {
	var armed atomic.Bool
	colls := initWrapped(t, openRing(t, 2, 8, true), 2, func(w World) World { return panicWorld{w, &armed} })
	startAll(t, colls) // the first start connects the queues
	armed.Store(true)
	for _, c := range colls {
		require.NoError(t, c.Start())
	}
	for r, c := range colls {
		err := c.Wait(context.Background())
		require.ErrorIs(t, err, ErrInternal, "rank %d", r)
		assert.Contains(t, err.Error(), "the caller's allgather failed", "rank %d", r)
		assert.NoError(t, c.Close(), "rank %d", r)
	}
}

// stuckWorld is a World whose Allgather, once armed, blocks until released, whatever its
// context says: a caller's World that does not honour it.
type stuckWorld struct {
	World
	armed            *atomic.Bool
	entered, release chan struct{}
}

func (w stuckWorld) Allgather(ctx context.Context, send, recv []byte) error {
	if w.armed.Load() {
		w.entered <- struct{}{}
		<-w.release
		return errors.New("released")
	}
	return w.World.Allgather(ctx, send, recv)
}

// TestCloseStuckStart: a Close whose start in flight does not stop (its World call ignores
// the context) returns after twice the hang timeout with ErrTimeout, leaving what the start may
// still use allocated; it is not a provider's failure.
func TestCloseStuckStart(t *testing.T) {
	var armed atomic.Bool
	entered, release := make(chan struct{}, 2), make(chan struct{})
	defer close(release)
	p := openRingHang(t, 2, 8, true, 200*time.Millisecond)
	colls := initWrapped(t, p, 2, func(w World) World { return stuckWorld{w, &armed, entered, release} })
	startAll(t, colls)
	armed.Store(true)
	require.NoError(t, colls[0].Start())
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the start made no World call")
	}
	t0 := time.Now()
	err := colls[0].Close()
	require.ErrorIs(t, err, ErrTimeout)
	assert.NotErrorIs(t, err, ErrProvider)
	assert.Contains(t, err.Error(), "the start in flight did not stop within 400ms: its queues and memory are left allocated")
	assert.Less(t, time.Since(t0), 5*time.Second)
}

// testSecret is the job secret of the tests' bootstrap worlds.
var testSecret = []byte("coredag library tests: 32 bytes or more of secret")

// TestBootstrapWorlds runs the ring allreduce over coredag's own TCP bootstrap (the World
// BootstrapWorld returns, with the ranks given here instead of by a launcher).
func TestBootstrapWorlds(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	const ranks = 2
	p := openRingHang(t, ranks, 32, true, 5*time.Second)
	colls := make([]*Coll, ranks)
	errs := make([]error, ranks)
	var wg sync.WaitGroup
	for r := range colls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := bootstrap.Connect(context.Background(), bootstrap.Config{World: bootstrap.World{Rank: r, Size: ranks}, Addr: addr, Timeout: 5 * time.Second, Secret: testSecret})
			if err != nil {
				errs[r] = err
				return
			}
			w := &bootWorld{c: c}
			t.Cleanup(func() { w.Close() })
			if colls[r], errs[r] = p.Init(context.Background(), w); errs[r] != nil {
				return
			}
			d := make([]float32, ranks*32)
			if errs[r] = colls[r].Bind("data", f32bytes(d)); errs[r] != nil {
				return
			}
			for it := 0; it < 5 && errs[r] == nil; it++ {
				fill(d, r, it)
				if errs[r] = colls[r].Start(); errs[r] == nil {
					errs[r] = colls[r].Wait(context.Background())
				}
				want := make([]float32, len(d))
				for q := 0; q < ranks; q++ {
					x := make([]float32, len(d))
					fill(x, q, it)
					for i := range want {
						want[i] += x[i]
					}
				}
				assert.Equal(t, want, d, "rank %d iteration %d", r, it)
			}
		}()
	}
	wg.Wait()
	for r, c := range colls {
		assert.NoError(t, errs[r], "rank %d", r)
		if c != nil {
			c.Close()
		}
	}
}

// TestBootstrapWorldNeedsSecret: a bootstrap World of several ranks without a job secret is
// refused at once, saying how to give one.
func TestBootstrapWorldNeedsSecret(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_RANK", "1")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	t.Setenv(bootstrap.SecretEnv, "")
	t.Setenv("OMPI_MCA_orte_precondition_transports", "")
	_, err := BootstrapWorld(context.Background(), "127.0.0.1:1")
	require.ErrorIs(t, err, ErrWorld)
	assert.Contains(t, err.Error(), "need a job secret")
	assert.Contains(t, err.Error(), bootstrap.SecretEnv)
}

// TestBootstrapWorldMessages: what the library's bootstrap says when the launcher gave it no
// rank, or no address for several ranks, names what a library caller can do, not the
// command's flags.
func TestBootstrapWorldMessages(t *testing.T) {
	for _, v := range []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"} {
		t.Setenv(v, "")
	}
	_, err := BootstrapWorld(context.Background(), "127.0.0.1:1")
	require.ErrorIs(t, err, ErrWorld)
	assert.Contains(t, err.Error(), "rank and world size are unknown: start the processes with mpirun or srun")
	assert.NotContains(t, err.Error(), "--rank")

	t.Setenv("PMI_RANK", "1")
	_, err = BootstrapWorld(context.Background(), "127.0.0.1:1")
	require.ErrorIs(t, err, ErrWorld)
	assert.Contains(t, err.Error(), `PMI_RANK="1" but PMI_SIZE="" (set both)`)

	t.Setenv("PMI_SIZE", "2")
	_, err = BootstrapWorld(context.Background(), "")
	require.ErrorIs(t, err, ErrWorld)
	assert.Contains(t, err.Error(), "2 ranks (from PMI_RANK/PMI_SIZE) need rank 0's address: pass BootstrapWorld HOST:PORT")
}

// TestBootstrapWorldTooLarge: a launcher's world size past any plan's is refused before rank 0
// makes room for its peers.
func TestBootstrapWorldTooLarge(t *testing.T) {
	require.Equal(t, elaborate.MaxRanks, bootstrap.MaxSize, "the bootstrap's bound is the plans' bound")
	t.Setenv("OMPI_COMM_WORLD_RANK", "0")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2147483648")
	_, err := BootstrapWorld(context.Background(), "127.0.0.1:1")
	require.ErrorIs(t, err, ErrWorld)
	assert.Contains(t, err.Error(), "2147483648 ranks (from OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE) are more than any plan has")
}
