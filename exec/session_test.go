package exec_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/softnic"
)

// TestSessionRunsMany: a prepared session runs again and again, each Run re-arming the same
// queues (on the offload engine, WAIT counts and ENABLE indices go on from the iterations before),
// and k Runs of one iteration do what one Run of k iterations does, counter for counter.
func TestSessionRunsMany(t *testing.T) {
	const runs = 5
	for _, c := range []engineCase{engineCases[0], engineCases[2], engineCases[3], engineCases[4]} {
		t.Run(c.name, func(t *testing.T) {
			g := exec.RingAllreduceForTest(4, 5)
			plan, err := compileFor(g, c.target)
			require.NoError(t, err)
			ref, err := exec.Reference(g)
			require.NoError(t, err)
			opts := exec.Options{Engine: c.engine, Reference: ref}
			newNIC := func() *softnic.NIC {
				return softnic.New(softnic.Options{NoCrossChannel: !c.cross, Triggers: c.trig, Seeded: true, Seed: 7})
			}
			opts.Iters = runs
			once, err := exec.Run(context.Background(), plan, newNIC(), opts)
			require.NoError(t, err)
			require.True(t, once.OK, once.Summary())

			s, err := exec.Prepare(context.Background(), plan, newNIC(), opts)
			require.NoError(t, err)
			defer s.Close()
			assert.Equal(t, c.engine, s.Engine())
			assert.Same(t, plan, s.Plan())
			var sum exec.Result
			for k := 0; k < runs; k++ {
				res, err := s.Run(context.Background(), 1)
				require.NoError(t, err, "run %d", k)
				require.True(t, res.OK, "run %d: %s", k, res.Summary())
				assert.Equal(t, 1, res.Iters)
				sum.WQEsPosted += res.WQEsPosted
				sum.CQEsPolled += res.CQEsPolled
				sum.Waits += res.Waits
				sum.Enables += res.Enables
				sum.HostSteps += res.HostSteps
				sum.Triggered += res.Triggered
			}
			assert.Equal(t, once.WQEsPosted, sum.WQEsPosted)
			assert.Equal(t, once.CQEsPolled, sum.CQEsPolled)
			assert.Equal(t, once.Waits, sum.Waits)
			assert.Equal(t, once.Enables, sum.Enables)
			assert.Equal(t, once.HostSteps, sum.HostSteps)
			assert.Equal(t, once.Triggered, sum.Triggered)

			require.NoError(t, s.Close())
			require.NoError(t, s.Close(), "Close is idempotent")
			_, err = s.Run(context.Background(), 1)
			assert.ErrorIs(t, err, exec.ErrSessionClosed)
		})
	}
}

// TestSessionAfterFailure: Run wants at least one iteration, and a Run that fails leaves the
// session for Close only.
func TestSessionAfterFailure(t *testing.T) {
	g, _ := loadPlan(t, "../plans/ring_allreduce.dag", 2, map[string]int64{"n": 4})
	plan, err := compileFor(g, "connectx")
	require.NoError(t, err)
	s, err := exec.Prepare(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Offload, HangTimeout: time.Second})
	require.NoError(t, err)
	defer s.Close()
	res, err := s.Run(context.Background(), 3)
	require.NoError(t, err)
	require.True(t, res.OK)
	_, err = s.Run(context.Background(), 0)
	assert.ErrorContains(t, err, "need at least 1")

	// A session of a plan whose receive never matches hangs in its first iteration.
	bad := exec.FaultGraphForTest("unmatched")
	bp, err := exec.GenericPlanForTest(bad)
	require.NoError(t, err)
	s2, err := exec.Prepare(context.Background(), bp, softnic.New(softnic.Options{NoCrossChannel: true}), exec.Options{Engine: exec.Poll, Reference: exec.NewMemory(bad), HangTimeout: time.Second})
	require.NoError(t, err)
	defer s2.Close()
	_, err = s2.Run(context.Background(), 2)
	var h *exec.HangError
	require.ErrorAs(t, err, &h)
	assert.Equal(t, 0, h.Iteration)
	_, err = s2.Run(context.Background(), 1)
	assert.ErrorIs(t, err, exec.ErrSessionFailed)
	assert.ErrorContains(t, err, "prepare a new session")
}

func TestSelect(t *testing.T) {
	cross := softnic.New(softnic.Options{}).Caps()
	plain := softnic.New(softnic.Options{NoCrossChannel: true}).Caps()
	for _, c := range []struct {
		engine     exec.Engine
		target     string
		caps       nic.Caps
		wantEngine exec.Engine
		wantTarget string
		wantErr    error
	}{
		{exec.Auto, "", cross, exec.Offload, "connectx", nil},
		{exec.Auto, "", plain, exec.Poll, "generic", nil},
		{exec.Auto, "generic", cross, exec.Poll, "generic", nil},
		{exec.Auto, "connectx-inline", cross, exec.Offload, "connectx-inline", nil},
		{exec.Auto, "connectx", plain, 0, "", nic.ErrNoCrossChannel},
		{exec.Poll, "", cross, exec.Poll, "generic", nil},
		{exec.Poll, "connectx", cross, 0, "", exec.ErrNeedsGenericTarget},
		{exec.Offload, "", cross, exec.Offload, "connectx", nil},
		{exec.Offload, "", plain, 0, "", nic.ErrNoCrossChannel},
		{exec.Offload, "generic", cross, 0, "", exec.ErrNeedsCrossChannelTarget},
		{exec.Auto, "nosuch", cross, 0, "", exec.ErrUnknownTarget},
		// Triggered targets: the offload engine where the NIC has counters (libfabric FI_TRIGGER),
		// the poll engine for auto elsewhere, and a refusal that says why for offload.
		{exec.Auto, "triggered-sockets", nic.Caps{Counters: true}, exec.Offload, "triggered-sockets", nil},
		{exec.Auto, "triggered-sockets", nic.Caps{}, exec.Poll, "triggered-sockets", nil},
		{exec.Offload, "triggered-sockets", nic.Caps{}, 0, "", nic.ErrProviderLimited},
		{exec.Engine(9), "generic", cross, 0, "", exec.ErrUnknownEngine},
	} {
		e, tg, err := exec.Select(c.engine, c.target, c.caps)
		if c.wantErr != nil {
			var se *exec.SelectError
			require.ErrorAs(t, err, &se, "%v %q", c.engine, c.target)
			assert.ErrorIs(t, err, c.wantErr, "%v %q", c.engine, c.target)
			assert.Equal(t, c.engine, se.Engine)
			continue
		}
		require.NoError(t, err, "%v %q", c.engine, c.target)
		assert.Equal(t, c.wantEngine, e, "%v %q", c.engine, c.target)
		assert.Equal(t, c.wantTarget, tg.Name, "%v %q", c.engine, c.target)
	}
	_, err := exec.ParseEngine("fast")
	assert.ErrorIs(t, err, exec.ErrUnknownEngine)

	// Prepare applies the same rules to the plan's target and the provider's caps.
	g := exec.RingAllreduceForTest(2, 4)
	plan, err := compileFor(g, "connectx")
	require.NoError(t, err)
	_, err = exec.Prepare(context.Background(), plan, softnic.New(softnic.Options{NoCrossChannel: true}), exec.Options{})
	assert.ErrorIs(t, err, nic.ErrNoCrossChannel)
	_, err = exec.Prepare(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Poll})
	assert.ErrorIs(t, err, exec.ErrNeedsGenericTarget)
	assert.True(t, errors.As(err, new(*exec.SelectError)))
}

// outsideHeap is the software NIC seen as a provider whose registered memory is not in the Go
// heap and is gone once closed, as a real NIC's is: it hides nic.HostMemory, and a closed region's
// bytes are overwritten.
type outsideHeap struct{ *softnic.NIC }

func (o outsideHeap) MRBytes() {} // not nic.HostMemory's signature: hides the embedded method

func (o outsideHeap) Open(rank int) (nic.Context, error) {
	c, err := o.NIC.Open(rank)
	return releasingCtx{c}, err
}

type releasingCtx struct{ nic.Context }

func (c releasingCtx) AllocPD() (nic.PD, error) {
	pd, err := c.Context.AllocPD()
	return releasingPD{pd}, err
}

type releasingPD struct{ nic.PD }

func (pd releasingPD) AllocMR(size int, access nic.Access) (nic.MR, error) {
	mr, err := pd.PD.AllocMR(size, access)
	return releasingMR{mr}, err
}

type releasingMR struct{ nic.MR }

func (m releasingMR) Close() error {
	for i := range m.Bytes() {
		m.Bytes()[i] = 0xEE
	}
	return m.MR.Close()
}

// TestRunCopiesForeignMemory: exec.Run closes its session, which releases a real NIC's memory,
// so the Result's memory must be a copy in the Go heap by then.
func TestRunCopiesForeignMemory(t *testing.T) {
	g := exec.RingAllreduceForTest(4, 5)
	plan, err := compileFor(g, engineCases[0].target)
	require.NoError(t, err)
	var p nic.Provider = outsideHeap{softnic.New(softnic.Options{})}
	_, isHost := p.(nic.HostMemory)
	require.False(t, isHost)
	res, err := exec.Run(context.Background(), plan, p, exec.Options{Engine: engineCases[0].engine})
	require.NoError(t, err)
	require.True(t, res.OK, res.Summary())
	ref, err := exec.Reference(g)
	require.NoError(t, err)
	assert.Empty(t, res.Memory.Diff(ref), "the result's memory was released with the session")

	c := res.Memory.Clone()
	assert.Empty(t, c.Diff(res.Memory))
	b := c.Bytes(0, 0)
	b[0]++
	assert.NotEqual(t, b[0], res.Memory.Bytes(0, 0)[0], "a clone shares no bytes with its source")
}

// failingClose is a provider whose rank 1 cannot release its protection domain or its device
// context.
type failingClose struct{ nic.Provider }

func (p failingClose) Open(rank int) (nic.Context, error) {
	c, err := p.Provider.Open(rank)
	if err != nil || rank != 1 {
		return c, err
	}
	return failingCtx{c}, nil
}

type failingCtx struct{ nic.Context }

var errStuck = errors.New("the provider is stuck")

func (c failingCtx) Close() error {
	_ = c.Context.Close()
	return errStuck
}

func (c failingCtx) AllocPD() (nic.PD, error) {
	pd, err := c.Context.AllocPD()
	if err != nil {
		return pd, err
	}
	return failingPD{pd}, nil
}

type failingPD struct{ nic.PD }

func (pd failingPD) Close() error {
	_ = pd.PD.Close()
	return errStuck
}

// TestCloseReportsTeardown: what the provider fails to release at the end of a run is reported,
// every object of every rank tried, and the run's own result stays as it was.
func TestCloseReportsTeardown(t *testing.T) {
	g := exec.RingAllreduceForTest(4, 5)
	plan, err := compileFor(g, "generic")
	require.NoError(t, err)
	res, err := exec.Run(context.Background(), plan, failingClose{softnic.New(softnic.Options{})}, exec.Options{Engine: exec.Poll})
	require.ErrorIs(t, err, errStuck)
	require.NotNil(t, res)
	assert.True(t, res.OK, res.Summary())
	assert.Contains(t, err.Error(), "rank 1: closing the protection domain: the provider is stuck")
	assert.Contains(t, err.Error(), "rank 1: closing the device context: the provider is stuck")
	assert.NotContains(t, err.Error(), "rank 0")

	s, err := exec.Prepare(context.Background(), plan, failingClose{softnic.New(softnic.Options{})}, exec.Options{Engine: exec.Poll})
	require.NoError(t, err)
	require.ErrorIs(t, s.Close(), errStuck)
	require.NoError(t, s.Close(), "a second Close has nothing left to report")
}
