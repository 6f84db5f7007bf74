package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
)

// dropWaits lowers every WAIT of rank 0 to count 0, as a lowering that forgot a dependency
// would: the chains no longer enforce the plan's edges.
func dropWaits(p *ir.Plan) {
	for q := range p.Ranks[0].Queues {
		for i := range p.Ranks[0].Queues[q].Chain {
			if e := &p.Ranks[0].Queues[q].Chain[i]; e.Opcode == ir.OpcWait {
				e.Wait.Count = 0
			}
		}
	}
}

// compile replays the chains it lists, to stdout or to a file, as text or JSON: chains that do
// not enforce the plan are an internal error naming the op and the chain entries, and -o is
// left as it was.
func TestCompileReplaysChains(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyPlan(t, dir, "ring_allreduce.dag")
	plan := filepath.Join(dir, "ring_allreduce.dag")
	for _, c := range []struct {
		name, format, out string
	}{{"text", "text", ""}, {"json", "json", ""}, {"file", "text", "out.txt"}, {"json file", "json", "out.json"}} {
		t.Run(c.name, func(t *testing.T) {
			run := func(mangle func(*ir.Plan)) (error, string, string) {
				var stdout, stderr bytes.Buffer
				cmd := &compileCmd{paramFlags: paramFlags{Params: []string{"ranks=4"}, Type: "f32"}, Target: "connectx",
					Format: c.format, Replay: "auto", File: plan, mangle: mangle}
				if c.out != "" {
					cmd.Out = filepath.Join(dir, c.out)
				}
				err := cmd.Run(&env{ctx: context.Background(), stdin: bytes.NewReader(nil), stdout: &stdout, stderr: &stderr})
				return err, stdout.String(), stderr.String()
			}
			err, _, stderr := run(nil)
			require.NoError(t, err, stderr)
			var kept []byte
			if c.out != "" {
				kept = readFile(t, filepath.Join(dir, c.out))
			}

			err, stdout, stderr := run(dropWaits)
			require.Error(t, err)
			var ee *exitError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, exitFail, ee.code)
			msg := stderr
			if c.format == "json" {
				// the listing (when on stdout) and then the report: the report is the last value
				dec := json.NewDecoder(bytes.NewReader([]byte(stdout)))
				var report struct {
					Diagnostics []struct{ Code, Message string }
				}
				for dec.More() {
					require.NoError(t, dec.Decode(&report))
				}
				require.NotEmpty(t, report.Diagnostics, stdout)
				assert.Equal(t, "internal", report.Diagnostics[0].Code)
				msg = report.Diagnostics[0].Message
			}
			assert.Contains(t, msg, "internal error: the compiled chains fail their replay")
			assert.Regexp(t, `is not enforced: .*\(rank 0 \S+\[\d+\] \S+, rank 0 \S+\[\d+\] \S+\)`, msg, "names the op and the chain entries")
			if c.out != "" {
				assert.Equal(t, kept, readFile(t, filepath.Join(dir, c.out)), "-o is left as it was")
			}
		})
	}
}

// A triggered plan with more work on a rank than the triggered proof takes in reasonable time is
// replayed in part, and compile says so.
func TestCompileTriggeredReplayInPart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyPlan(t, dir, "ring_allreduce.dag")
	for _, c := range []struct {
		ranks string
		note  bool
	}{{"ranks=8", false}, {"ranks=64", true}} {
		code, _, stderr := invocation{dir: dir}.run(t, "compile", "--target", "triggered", "-p", c.ranks, "-o", "out.txt", "ring_allreduce.dag")
		require.Equal(t, exitOK, code, stderr)
		if c.note {
			assert.Regexp(t, `^ring_allreduce.dag: note: the replay did not prove the triggered work from its counters: a rank has \d+ entries, above the 512`, stderr)
		} else {
			assert.Empty(t, stderr)
		}
	}
}

// Past a million ops, --replay auto leaves the replay out and says so; --replay on replays, and
// the listing is the same either way.
func TestCompileReplayAuto(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	dir := t.TempDir()
	auto, on := filepath.Join(dir, "auto.txt"), filepath.Join(dir, "on.txt")
	code, _, stderr := coredag(t, "", "compile", "-p", "ranks=512", "-o", auto, "plans/ring_allreduce.dag")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stderr, "note: the compiled chains were not replayed on the NIC model: the plan's 1308160 ops are more than the 1048576 that --replay auto replays")
	code, _, stderr = coredag(t, "", "compile", "--replay", "on", "-p", "ranks=512", "-o", on, "plans/ring_allreduce.dag")
	require.Equal(t, exitOK, code, stderr)
	assert.NotContains(t, stderr, "not replayed")
	a, err := os.ReadFile(auto)
	require.NoError(t, err)
	b, err := os.ReadFile(on)
	require.NoError(t, err)
	assert.Equal(t, a, b)
}
