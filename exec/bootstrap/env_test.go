package bootstrap

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResolveWorld(t *testing.T) {
	tests := []struct {
		name       string
		rank, size int
		env        map[string]string
		want       World
		err        string
	}{
		{name: "flags", rank: 1, size: 4, want: World{1, 4, "flags"}},
		{name: "open mpi", rank: -1, size: -1, env: map[string]string{"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "3"},
			want: World{2, 3, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"}},
		{name: "pmi", rank: -1, size: -1, env: map[string]string{"PMI_RANK": "0", "PMI_SIZE": "2"}, want: World{0, 2, "PMI_RANK/PMI_SIZE"}},
		{name: "slurm", rank: -1, size: -1, env: map[string]string{"SLURM_PROCID": "7", "SLURM_NTASKS": "8"}, want: World{7, 8, "SLURM_PROCID/SLURM_NTASKS"}},
		{name: "open mpi wins over slurm", rank: -1, size: -1,
			env:  map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"},
			want: World{1, 2, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"}},
		{name: "flag overrides size", rank: -1, size: 5, env: map[string]string{"PMI_RANK": "3", "PMI_SIZE": "4"}, want: World{3, 5, "flags and PMI_RANK/PMI_SIZE"}},
		{name: "nothing", rank: -1, size: -1, err: "pass --rank R --ranks N"},
		{name: "half", rank: -1, size: -1, env: map[string]string{"PMI_RANK": "1"}, err: `PMI_SIZE="" \(set both`},
		{name: "garbage", rank: -1, size: -1, env: map[string]string{"SLURM_PROCID": "x", "SLURM_NTASKS": "2"}, err: `SLURM_PROCID="x" is not an integer`},
		{name: "rank too big", rank: 4, size: 4, err: `rank 4 \(from flags\) is out of range for 4 ranks: ranks are 0..3`},
		{name: "zero size", rank: 0, size: 0, err: "at least 1"},
		{name: "size past any plan's", rank: -1, size: -1, env: map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2147483648"},
			err: `^2147483648 ranks \(from OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE\) are more than any plan has: a world has at most 65536$`},
		{name: "largest size", rank: 65535, size: 65536, want: World{65535, 65536, "flags"}},
		{name: "negative rank flag", rank: -5, size: 2, err: `^--rank -5 is negative`},
		{name: "negative size flag", rank: 0, size: -3, err: `^--ranks -3: a run needs at least 1 process`},
		{name: "negative rank variable", rank: -1, size: -1, env: map[string]string{"OMPI_COMM_WORLD_RANK": "-2", "OMPI_COMM_WORLD_SIZE": "4"},
			err: `^launcher variable OMPI_COMM_WORLD_RANK=-2 is a negative rank`},
		{name: "negative size variable", rank: -1, size: -1, env: map[string]string{"PMI_RANK": "0", "PMI_SIZE": "-4"},
			err: `^launcher variable PMI_SIZE=-4: a run needs at least 1 process`},
		{name: "zero size variable", rank: -1, size: -1, env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "0"}, err: `SLURM_NTASKS=0`},
		{name: "flag covers a bad variable", rank: 1, size: -1, env: map[string]string{"PMI_RANK": "-9", "PMI_SIZE": "2"}, want: World{1, 2, "flags and PMI_RANK/PMI_SIZE"}},
		{name: "rank only", rank: 1, size: -1, err: `the world size is unknown \(--rank 1 was given\)`},
		{name: "size only", rank: -1, size: 3, err: `this process's rank is unknown \(--ranks 3 was given\)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := ResolveWorld(tt.rank, tt.size, func(k string) string { return tt.env[k] })
			if tt.err != "" {
				require.Error(t, err)
				require.Regexp(t, tt.err, err.Error())
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, w)
		})
	}
}

// TestFromLauncher: the library's way in takes rank and size from the launcher alone, and its
// hints name no flags.
func TestFromLauncher(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	w, err := FromLauncher(env(map[string]string{"PMI_RANK": "1", "PMI_SIZE": "3"}))
	require.NoError(t, err)
	require.Equal(t, World{1, 3, "PMI_RANK/PMI_SIZE"}, w)
	for _, m := range []map[string]string{
		nil,
		{"PMI_RANK": "1"},
		{"OMPI_COMM_WORLD_RANK": "-1", "OMPI_COMM_WORLD_SIZE": "2"},
		{"SLURM_PROCID": "0", "SLURM_NTASKS": "0"},
	} {
		_, err := FromLauncher(env(m))
		require.Error(t, err, m)
		require.Equal(t, m != nil, Launched(env(m)), m)
		require.NotContains(t, err.Error(), "--rank", m)
	}
}
