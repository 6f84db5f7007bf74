package exec_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
)

// footprintPlan has two odd-sized buffers (not multiples of a cache line) on three ranks.
const footprintPlan = `plan fp
param ranks = 3
buffer a f64[100003] remote_write init rank
buffer b u8[300001]
queue right to (rank + 1) % ranks peer left
queue left to (rank - 1) % ranks peer right
op s = write right a[0:8] to a[8:16]
`

func loadFootprintPlan(t *testing.T) *ir.Graph {
	g, err := planner.Load(t.Context(), "fp.dag", []byte(footprintPlan), nil, planner.Options{})
	require.NoError(t, err)
	return g
}

// allocated returns the bytes fn allocates on the heap.
func allocated(fn func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc - before.TotalAlloc)
}

// TestEstimateMatchesAllocations: the figures Estimate gives are what the reference and the
// software NIC really allocate for the buffers (the heap rounds large blocks up to 8 KiB pages),
// so a budget check cannot drift from the code that allocates.
func TestEstimateMatchesAllocations(t *testing.T) {
	g := loadFootprintPlan(t)
	sn := softnic.New(softnic.Options{})
	fp := exec.Estimate(g, sn, exec.Options{})
	assert.Equal(t, 3, fp.Ranks)

	var ref *exec.Memory
	got := allocated(func() { ref = exec.NewMemory(g) })
	runtime.KeepAlive(ref)
	assert.GreaterOrEqual(t, got, fp.Reference, "the reference copy")
	assert.Less(t, got, fp.Reference+3*8192+4096, "the reference copy")

	var raw []int64
	for i := range g.Buffers {
		raw = append(raw, g.Buffers[i].Bytes())
	}
	var regions int64
	for _, n := range raw {
		regions += sn.MRBytes(n)
	}
	assert.Equal(t, regions, fp.PerRank)
	dev, err := sn.Open(0)
	require.NoError(t, err)
	pd, err := dev.AllocPD()
	require.NoError(t, err)
	got = allocated(func() {
		for _, n := range raw {
			_, err := pd.AllocMR(int(n), nic.AccessLocalWrite)
			require.NoError(t, err)
		}
	})
	assert.GreaterOrEqual(t, got, fp.PerRank, "one rank's registered buffers")
	assert.Less(t, got, fp.PerRank+int64(len(raw))*8192+4096, "one rank's registered buffers")
	assert.Equal(t, budget.Add(budget.Mul(3, fp.PerRank), fp.Reference), fp.Buffers())
}

// TestEstimateIterations: latency samples and timeline rows grow with the iterations, and
// figures that overflow saturate instead of wrapping.
func TestEstimateIterations(t *testing.T) {
	g := loadFootprintPlan(t)
	fp := exec.Estimate(g, nil, exec.Options{Iters: 1000})
	assert.Equal(t, int64(16000), fp.Samples)
	assert.Zero(t, fp.Timeline)
	fp = exec.Estimate(g, nil, exec.Options{Iters: 1000, Timeline: true})
	assert.Equal(t, int64(1000*(len(g.Ops)*8+48)), fp.Timeline)
	fp = exec.Estimate(g, nil, exec.Options{Iters: 1 << 62, Timeline: true})
	assert.Equal(t, int64(1<<63-1), fp.Samples)
	assert.Equal(t, int64(1<<63-1), fp.Total())
	fp = exec.Estimate(g, nil, exec.Options{Ranks: []int{1}})
	assert.Equal(t, 1, fp.Ranks, "one local rank")
}

// TestFootprintCheck: a run that does not fit is refused with the figure, positioned at the
// largest buffer; one that fits runs.
func TestFootprintCheck(t *testing.T) {
	g := loadFootprintPlan(t)
	sn := softnic.New(softnic.Options{})
	fp := exec.Estimate(g, sn, exec.Options{Iters: 10})
	small := budget.Budget{Bytes: 1 << 20, From: "--mem"}
	err := fp.Check(small)
	var be *budget.Error
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "fp.dag:3:8", be.Pos.String(), "buffer a, the largest")
	assert.Equal(t, "buffers need 6.3 MiB in this process (3 ranks × 1.05 MiB registered with softnic, plus 3.15 MiB for the reference copy); "+
		"the largest, a, takes 781 KiB per rank; the memory budget is 1 MiB (set with --mem): lower the buffer sizes or the ranks param", be.Message())

	fits := budget.Budget{Bytes: 8 << 20, From: "--mem"}
	require.NoError(t, fp.Check(fits))
	err = exec.Estimate(g, sn, exec.Options{Iters: 200000}).Check(fits)
	require.ErrorAs(t, err, &be)
	assert.False(t, be.Pos.IsValid(), "the iterations come from a flag, not the plan")
	assert.Contains(t, be.Message(), "the run needs 9.35 MiB: 6.3 MiB for the buffers and 3.05 MiB for latency samples; the memory budget is 8 MiB")
	err = exec.Estimate(g, sn, exec.Options{Iters: 1 << 30}).Check(fits)
	assert.EqualError(t, err, "1073741824 iterations need 16 GiB for their latency samples (16 bytes each); the memory budget is 8 MiB (set with --mem): use fewer --iters")
}
