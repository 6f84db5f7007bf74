package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needTool skips the test when a tool is missing, unless CI is set: CI provides every tool these
// tests need, so there a missing one is a failure.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found (CI provides it): %v", name, err)
		}
		t.Skipf("%s not found: %v", name, err)
	}
}

// buildLib runs scripts/build-lib.sh into a temporary prefix and returns the prefix.
func buildLib(t *testing.T) string {
	t.Helper()
	if testing.Short() || os.Getenv("CI") == "" && os.Getenv("COREDAG_E2E") == "" {
		t.Skip("end-to-end (builds libcoredag.so and C programs): runs under CI, or with COREDAG_E2E=1")
	}
	for _, tool := range []string{"cc", "pkg-config", "bash"} {
		needTool(t, tool)
	}
	if _, err := os.Stat("/usr/include/rdma/fabric.h"); err != nil && os.Getenv("CI") == "" {
		t.Skip("libfabric's headers are not installed (apt-get install libfabric-dev): the library is built with -tags ofi")
	}
	prefix := t.TempDir()
	run(t, 10*time.Minute, nil, "bash", "../../scripts/build-lib.sh", prefix)
	for _, f := range []string{"lib/libcoredag.so", "include/coredag.h", "lib/pkgconfig/coredag.pc"} {
		if _, err := os.Stat(filepath.Join(prefix, f)); err != nil {
			t.Fatalf("build-lib.sh did not install %s: %v", f, err)
		}
	}
	return prefix
}

// compile builds the C program src against the library in prefix, with the flags pkg-config
// gives: the way docs/library.md tells users to.
func compile(t *testing.T, prefix, src string) string {
	t.Helper()
	env := []string{"PKG_CONFIG_PATH=" + filepath.Join(prefix, "lib", "pkgconfig")}
	flags := strings.Fields(run(t, time.Minute, env, "pkg-config", "--cflags", "--libs", "coredag"))
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	args := append([]string{"-std=c99", "-Wall", "-Wextra", "-Werror", "-o", bin, src}, flags...)
	run(t, time.Minute, nil, "cc", args...)
	return bin
}

// run runs a command with a bound and returns its standard output; it fails the test if the
// command fails, printing both outputs.
func run(t *testing.T, timeout time.Duration, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// cleanEnv unsets the launcher variables, so a NULL world means every rank in this process even
// when the tests themselves run under mpirun or srun.
var cleanEnv = []string{"OMPI_COMM_WORLD_RANK=", "OMPI_COMM_WORLD_SIZE=", "PMI_RANK=", "PMI_SIZE=", "SLURM_PROCID=", "SLURM_NTASKS="}

// TestC builds libcoredag.so and the C programs with the system's cc, as a user would, and runs
// them: the misuse cases of tests/c/misuse.c, and examples/c/inprocess.c.
func TestC(t *testing.T) {
	prefix := buildLib(t)
	misuse := compile(t, prefix, "../../tests/c/misuse.c")
	t.Run("misuse", func(t *testing.T) {
		out := run(t, 2*time.Minute, cleanEnv, misuse)
		t.Logf("tests/c/misuse.c:\n%s", out)
		if strings.Contains(out, "FAIL") || !strings.HasSuffix(out, "all cases passed\n") {
			t.Errorf("misuse cases failed:\n%s", out)
		}
		// Each case printed its line: a case that silently did not run would be missed otherwise.
		for _, c := range []string{"start before bind", "second start before wait", "bind of the wrong size", "free during a start",
			"world size differs from plan ranks", "plan that fails check", "coll_start NULL", "world allgather fails",
			"plan passed as a collective", "wait 10 ms for a start that takes 300", "an allgather that fails in a start",
			"bind of a scratch buffer", "plan from a set", "short message from a set", "world size a set does not serve",
			"set with a gap", "set opened for 0 ranks", "set path NULL", "device option", "free whose last barrier fails, rank 1",
			"free again after a failed free, rank 1",
			"start past the iteration limit", "start past the iteration limit again"} {
			if !strings.Contains(out, "ok "+c+":") && !strings.Contains(out, "ok "+c+"\n") { // an error's line, or a right use's
				t.Errorf("no line for case %q", c)
			}
		}
	})
	t.Run("launcher", func(t *testing.T) {
		env := append(append([]string(nil), cleanEnv...), "OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=2")
		out := run(t, time.Minute, env, misuse, "launcher")
		if !strings.Contains(out, "ok NULL world under launcher variables that make no sense: COREDAG_ERR_WORLD") ||
			!strings.HasSuffix(out, "all cases passed\n") {
			t.Errorf("tests/c/misuse.c launcher:\n%s", out)
		}
	})
	t.Run("inprocess", func(t *testing.T) {
		bin := compile(t, prefix, "../../examples/c/inprocess.c")
		for _, ranks := range []string{"1", "3", "4"} {
			out := run(t, 2*time.Minute, cleanEnv, bin, "../../plans/ring_allreduce.dag", ranks, "64", "20")
			if !strings.HasPrefix(out, "ok: 20 iterations of "+ranks+" ranks") {
				t.Errorf("inprocess with %s ranks: %s", ranks, out)
			}
		}
	})
}
