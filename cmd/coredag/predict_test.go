package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPredictTable(t *testing.T) {
	t.Parallel()
	code, out, errOut := coredag(t, "", "predict", "-p", "ranks=8", "--sizes", "1KiB..1MiB",
		"plans/ring_allreduce.dag", "plans/recursive_doubling_allreduce.dag")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.GreaterOrEqual(t, len(lines), 13, out)
	assert.Contains(t, lines[1], "ring_allreduce")
	assert.Contains(t, lines[1], "recursive_doubling_allreduce")
	assert.Regexp(t, `^\s+1 KiB\s+\S+ µs\s+\S+ µs$`, lines[2])
	assert.Regexp(t, `^\s+1 MiB\s`, lines[12])
	// with the guessed figures, recursive doubling wins small messages and the ring large ones
	assert.Contains(t, out, "crossover: recursive_doubling_allreduce is faster than ring_allreduce below about")
}

func TestPredictPlot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"p.svg", "p.png"} {
		path := filepath.Join(dir, name)
		code, _, errOut := coredag(t, "", "predict", "--sizes", "8B..64KiB", "--plot", path,
			"plans/ring_allreduce.dag", "plans/double_binary_tree_allreduce.dag")
		require.Equal(t, 0, code, errOut)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		if strings.HasSuffix(name, ".svg") {
			assert.Contains(t, string(b[:min(len(b), 400)]), "<svg")
			assert.Contains(t, string(b), "ring_allreduce")
		} else {
			assert.Equal(t, "\x89PNG", string(b[:4]))
		}
	}
}

func TestPredictParamsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	slow := filepath.Join(dir, "slow.json")
	require.NoError(t, os.WriteFile(slow, []byte(`{"provider": "slow", "L_ns": 1000000, "workers": 0}`), 0o644))
	code, out, errOut := coredag(t, "", "predict", "--params", slow, "--sizes", "8B", "-p", "ranks=2", "plans/ring_allreduce.dag")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "figures: slow")
	assert.Regexp(t, `8 B\s+[0-9.]+ ms`, out) // only latency: milliseconds
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("{\n  \"L_ns\": -3\n}"), 0o644))
	code, _, errOut = coredag(t, "", "predict", "--params", bad, "plans/ring_allreduce.dag")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "bad.json: L_ns is -3")
}

func TestPredictErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sizes", "8X..1KiB"}, `--sizes 8X..1KiB: "8X" is not a size; write a range A..B`},
		{[]string{"--sizes", "1MiB..1KiB"}, "ends below its start"},
		{[]string{"--sizes", "0..X"}, `--sizes 0..X: "0": a message size must be at least 1 byte; write a range A..B`},
		{[]string{"--size-param", "m"}, `no param "m"`},
		{[]string{"--plot", "x.jpg"}, "must end in .svg or .png"},
		{[]string{"--target", "nosuch"}, "--target"},
	} {
		code, _, errOut := coredag(t, "", append(append([]string{"predict"}, c.args...), "plans/ring_allreduce.dag")...)
		assert.Equal(t, 2, code, c.args)
		assert.Contains(t, errOut, c.want, c.args)
	}
	// a size param that does not scale the slices
	dir := t.TempDir()
	f := filepath.Join(dir, "odd.dag")
	require.NoError(t, os.WriteFile(f, []byte("plan odd\nparam ranks = 2\nparam n = 4\nbuffer a u8[n + 1]\nqueue q to 1 - rank peer q\nif rank == 0 { op s = send q a }\nif rank == 1 { op r = recv q a }\n"), 0o644))
	code, _, errOut := coredag(t, "", "predict", f)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "not linear in n")
}

// TestPredictNamesFileOnce: a refusal of the memory budget, whichever model meets it, is
// reported as check reports it (exit 2, the file named once by the position), and a mistake at
// the size param's trial value names the file once too, at the mistake's position (both used
// to print "ring_allreduce.dag: ring_allreduce.dag:30:1: ...").
func TestPredictNamesFileOnce(t *testing.T) {
	t.Parallel()
	const ring = "plans/ring_allreduce.dag"
	_, _, checkOut := coredag(t, "", "check", "--mem", "1", ring)
	for _, model := range []string{"auto", "symmetric", "ops"} {
		code, _, errOut := coredag(t, "", "predict", "--model", model, "--mem", "1", ring)
		assert.Equal(t, exitUsage, code, "%s: %s", model, errOut)
		assert.Equal(t, firstLine(checkOut), firstLine(errOut), model)
		assert.Equal(t, 1, strings.Count(errOut, "ring_allreduce.dag"), "%s: %s", model, errOut)
	}
	plan := writeTemp(t, "n16.dag", "plan n16\nparam ranks = 2\nparam n = 1024\nassert n >= 16, \"n must be at least 16\"\nbuffer data f32[n]\nop z = nop\n")
	code, _, errOut := coredag(t, "", "predict", "--model", "ops", plan)
	assert.Equal(t, exitFail, code, errOut)
	assert.Equal(t, "coredag: "+plan+":4:1: at n = 1: assertion failed: n must be at least 16 (with n = 1 as given)", firstLine(errOut))
}

// The symmetric model predicts what the op-by-op one does, and says which model ran; a plan
// whose ranks differ is refused by it, and auto falls back to op by op, saying why.
func TestPredictSymmetric(t *testing.T) {
	t.Parallel()
	args := []string{"predict", "-p", "ranks=16", "--sizes", "8B..1MiB", "plans/ring_allreduce.dag", "plans/recursive_doubling_allreduce.dag"}
	code, ops, errOut := coredag(t, "", append(args, "--model", "ops")...)
	require.Equal(t, 0, code, errOut)
	code, sym, errOut := coredag(t, "", append(args, "--model", "symmetric")...)
	require.Equal(t, 0, code, errOut)
	table := func(out string) string { s, _, _ := strings.Cut(out, "model:"); return s }
	assert.Equal(t, table(ops), table(sym))
	assert.Contains(t, ops, "model: ring_allreduce: op by op, every one of its 16 ranks simulated")
	assert.Contains(t, sym, "model: ring_allreduce: symmetric under rotation")
	assert.Contains(t, sym, "model: recursive_doubling_allreduce: symmetric under xor")
	assert.Contains(t, sym, "(8 of 15) were elaborated and found to be rank 0 moved, the others are assumed to be")

	code, _, errOut = coredag(t, "", "predict", "--model", "symmetric", "-p", "ranks=16", "plans/double_binary_tree_allreduce.dag")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "double_binary_tree_allreduce.dag: predict: the plan is not symmetric: under rotation")
	code, _, errOut = coredag(t, "", "predict", "--model", "symmetric", "--measure", "plans/ring_allreduce.dag")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--model ops")

	// auto: large plans fold (a ring of 1024 ranks has 5 million ops), small ones do not
	code, out, errOut := coredag(t, "", "predict", "-p", "ranks=1024", "--sizes", "1MiB", "plans/ring_allreduce.dag")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "model: ring_allreduce: symmetric under rotation (rank r -> r + k mod ranks), rank 0 simulated for all 1024 ranks")
	code, out, errOut = coredag(t, "", "predict", "-p", "ranks=512", "--sizes", "1MiB", "plans/double_binary_tree_allreduce.dag")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "op by op, every one of its 512 ranks")
}

// A mistake on a rank the symmetric model elaborates is reported as check reports it.
func TestPredictSymmetricDiagnostics(t *testing.T) {
	t.Parallel()
	code, _, errOut := coredag(t, "", "predict", "-p", "ranks=16384", "--sizes", "1MiB", "testdata/scale/ring_allreduce.dag")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "ring_allreduce.dag:12:51: queue right depth 65536: must be between 1 and 32768 (on rank 0)")
	assert.Contains(t, errOut, "^")
}

// On a world no larger than --samples + 1, every rank is compared with rank 0, and the line
// says so; the plan is still not checked.
func TestPredictSymmetricComplete(t *testing.T) {
	t.Parallel()
	code, out, errOut := coredag(t, "", "predict", "--model", "symmetric", "-p", "ranks=4", "--sizes", "1KiB", "plans/ring_allreduce.dag")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "rank 0 simulated for all 4 ranks; every other rank was elaborated and found to be rank 0 moved; the plan was not checked")
}

// The ring allreduce of 16,384 ranks on the cross-channel targets: rank 0 has 65,532 WAITs and
// ENABLEs per iteration, which no one queue holds; connectx spreads them over two management
// queues, connectx-inline manages right.sq from two, and the folded rank predicts (a few seconds
// of CPU each).
func TestPredictRing16384CrossChannel(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of CPU per target")
	}
	t.Parallel()
	for _, target := range []string{"connectx", "connectx-inline"} {
		code, out, errOut := coredag(t, "", "predict", "-p", "ranks=16384", "--target", target, "--sizes", "1MiB", "--samples", "1",
			"plans/ring_allreduce.dag")
		require.Equal(t, 0, code, "%s: %s", target, errOut)
		assert.Regexp(t, `(?m)^\s+1 MiB\s+\d+(\.\d+)? ms$`, out, target)
		assert.Contains(t, out, "rank 0 simulated for all 16384 ranks", target)
	}
}

// TestParseSizesErrors: --sizes says what it takes, in its own words: a size of 0 was refused
// as if it were malformed, with the words of the memory budget's parser behind it.
func TestParseSizesErrors(t *testing.T) {
	t.Parallel()
	const syntax = "; write a range A..B, every power of two from A to B, as in --sizes 8B..16MiB, or a list, as in --sizes 1KiB,3MiB; " +
		"sizes are whole bytes, with B, KiB, MiB, GiB or TiB"
	for s, want := range map[string]string{
		"0..X":       `"0": a message size must be at least 1 byte` + syntax,
		"0B,8B":      `"0B": a message size must be at least 1 byte` + syntax,
		"8B..X":      `"X" is not a size` + syntax,
		"1.5KiB":     `"1.5KiB" is not a size` + syntax,
		"8B..":       "a size is missing" + syntax,
		"1KiB,,2KiB": "a size is missing" + syntax,
		"1MiB..1KiB": "the range ends below its start" + syntax,
	} {
		_, err := parseSizes(s)
		assert.EqualError(t, err, want, s)
		assert.NotContains(t, fmt.Sprint(err), "budget", s)
	}
	got, err := parseSizes("1TiB, 2 KiB, 1TiB")
	require.NoError(t, err)
	assert.Equal(t, []int64{2 << 10, 1 << 40}, got, "a list is sorted, each size once")
}

// TestParseSizesRange: a range doubles from its start and stops at its end, even at the end of
// int64 (it used to double past it into negative sizes).
func TestParseSizesRange(t *testing.T) {
	got, err := parseSizes("8B..64")
	require.NoError(t, err)
	assert.Equal(t, []int64{8, 16, 32, 64}, got)
	got, err = parseSizes("3..9223372036854775807")
	require.NoError(t, err)
	require.Len(t, got, 62)
	assert.Equal(t, int64(3)<<61, got[61])
	got, err = parseSizes("1KiB..1KiB")
	require.NoError(t, err)
	assert.Equal(t, []int64{1024}, got)
}
