package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/predict"
)

// calibrate measures the micro-benchmarks on the software NIC and writes figures that predict
// reads back.
func TestCalibrateSoftnic(t *testing.T) {
	t.Parallel()
	endToEnd(t) // runs the micro-benchmarks: 4.5 s of CPU
	out := filepath.Join(t.TempDir(), "softnic.json")
	code, _, errOut := coredag(t, "", "calibrate", "--iters", "3", "-o", out)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "pingpong 1 MiB")
	assert.Regexp(t, `reduce 1 MiB\s+\S+ [µm]s\s+\S+ [µm]s\s+[-+]\d+%`, errOut)
	par, err := predict.ReadParams(out)
	require.NoError(t, err)
	assert.Equal(t, "softnic", par.Provider)
	assert.Equal(t, 1, par.Workers)
	assert.Positive(t, par.B, "a megabyte takes time to move")
	code, stdout, errOut := coredag(t, "", "predict", "--params", out, "--sizes", "1KiB", "plans/ring_allreduce.dag")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, stdout, "figures: softnic (1 shared worker(s))")
}

func TestCalibrateErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--provider", "nosuch"}, "unknown provider"},
		{[]string{"--iters", "0"}, "--iters 0"},
		{[]string{"--target", "nosuch"}, "--target"},
		{[]string{"-o", filepath.Join(os.TempDir(), "no", "such", "dir", "x.json")}, "x.json"},
	} {
		code, _, errOut := coredag(t, "", append([]string{"calibrate"}, c.args...)...)
		assert.Equal(t, 2, code, c.args)
		assert.Contains(t, errOut, c.want, c.args)
	}
}
