package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// underAddressLimit runs the built binary with its address space limited to about 2 GB
// (RLIMIT_AS, set by the shell's ulimit -v in the process that then becomes coredag) and two
// minutes to finish. It returns the exit code and the combined output, and fails on Go runtime
// crash output.
func underAddressLimit(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", `ulimit -v 2000000 && exec timeout 120 "$0" "$@"`, binary}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	require.NotEqual(t, 124, code, "coredag %q ran out of time:\n%s", args, out.String())
	noCrash(t, out.String())
	return code, out.String()
}

// TestAddressLimit: under ulimit -v 2000000, plans and flags that need more than the address
// space leaves are refused with the figure, never "fatal error: out of memory" (the edge array
// of the ring allreduce was sized for 4096 or 65536 ranks before the op limit stopped it, and
// --mem 100GiB was taken at its word).
func TestAddressLimit(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	const ring = "plans/ring_allreduce.dag"
	code, out := underAddressLimit(t, nil, "check", "-p", "ranks=4096", ring)
	assert.Equal(t, exitUsage, code, out)
	assert.Regexp(t, `^coredag: plans/ring_allreduce\.dag:\d+:1: the plan has more than \d+ ops over all its ranks .*, and a plan takes about 2 KiB per op to check, compile and run(, besides .* in all)?; the memory budget is .* \(set with --mem or COREDAG_MEM\): `, out) // the whole first line

	code, out = underAddressLimit(t, []string{"COREDAG_MEM=1GiB"}, "check", "-p", "ranks=65536", ring)
	assert.Equal(t, exitUsage, code, out)
	assert.Contains(t, firstLine(out), "coredag: note: COREDAG_MEM asks for 1 GiB, more than the address-space limit (ulimit -v) leaves")
	assert.Regexp(t, `\ncoredag: plans/ring_allreduce\.dag:\d+:1: the plan has more than \d+ ops over all its ranks`, out)

	// A larger --mem is lowered to what the limit leaves, and a note says so.
	code, out = underAddressLimit(t, nil, "check", "--mem", "100GiB", "-p", "ranks=4096", ring)
	assert.Equal(t, exitUsage, code, out)
	assert.Regexp(t, `^coredag: note: --mem asks for 100 GiB, more than the address-space limit \(ulimit -v\) leaves: the memory budget is .*, 80% of what the address-space limit \(ulimit -v\) leaves\n`, out)
	assert.Contains(t, out, "(--mem 100 GiB, lowered to 80% of what the address-space limit (ulimit -v) leaves)")

	code, out = underAddressLimit(t, nil, "run", "--mem", "100GiB", "-p", "n=64MiB", ring)
	assert.Equal(t, exitUsage, code, out)
	assert.Contains(t, out, "buffers need 14 GiB in this process")
	assert.Contains(t, out, "(--mem 100 GiB, lowered to 80% of what the address-space limit (ulimit -v) leaves): lower the buffer sizes")
	assert.NotContains(t, out, "PASS")

	// `after` edges that do not fit are refused before they are allocated: exit 2, the figure.
	plan := writeTemp(t, "edges.dag", "plan edges\nparam ranks = 16\nfor j in 0 .. 400 { op a[j] = nop }\nfor j in 0 .. 400 { op b[j] = nop }\n"+
		"for i in 0 .. 400 {\n  for j in 0 .. 400 { b[i] after a[j] }\n}\n")
	code, out = underAddressLimit(t, nil, "check", "--mem", "32MiB", plan)
	assert.Equal(t, exitUsage, code, out)
	// They count with what the plan holds besides (one budget: its ops and `after` references).
	assert.Equal(t, "coredag: "+plan+":6:34: the plan's `after` edges on 8 ranks need 24.4 MiB (1280000 of 20 bytes each) besides 1.56 MiB for its ops (800 of 2 KiB each) and 18 MiB for its `after` references (262144 of 72 bytes each): 44 MiB in all; the memory budget is 32 MiB (set with --mem): lower the ranks param or the plan's size", firstLine(out))
}
