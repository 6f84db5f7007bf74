package exec_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
)

// TestVerdictsByRank gives the run a reference that differs on ranks 1 and 3 only: each rank's
// verdict carries its own mismatches and no other rank's.
func TestVerdictsByRank(t *testing.T) {
	g := exec.RingAllreduceForTest(4, 8)
	ref, err := exec.Reference(g)
	require.NoError(t, err)
	data, ok := ref.Buffer("data")
	require.True(t, ok)
	ref.Bytes(1, data)[0] ^= 0xff
	ref.Bytes(3, data)[4] ^= 0xff
	ref.Bytes(3, data)[12] ^= 0xff
	for _, e := range ringEngines {
		t.Run(e.name, func(t *testing.T) {
			plan := mustCompile(t, g, e.engine)
			sn := softnic.New(softnic.Options{NoCrossChannel: e.engine == exec.Poll})
			res, err := exec.Run(context.Background(), plan, sn, exec.Options{Engine: e.engine, Reference: ref})
			require.NoError(t, err)
			assert.False(t, res.OK)
			require.Len(t, res.Verdicts, 4)
			for r, v := range res.Verdicts {
				assert.Equal(t, r, v.Rank)
				assert.Equal(t, r != 1 && r != 3, v.OK, "rank %d", r)
				for _, m := range v.Mismatches {
					assert.Equal(t, r, m.Rank)
				}
			}
			require.Len(t, res.Verdicts[1].Mismatches, 1)
			require.Len(t, res.Verdicts[3].Mismatches, 1)
			assert.Equal(t, int64(0), res.Verdicts[1].Mismatches[0].Index)
			assert.Equal(t, int64(1), res.Verdicts[3].Mismatches[0].Index)
			assert.Equal(t, int64(2), res.Verdicts[3].Mismatches[0].Count)
		})
	}
}
