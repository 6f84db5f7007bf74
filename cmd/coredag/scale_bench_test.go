//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCLIRing runs the built coredag as a user does on testdata/scale/ring_allreduce.dag at 256,
// 512 and 1024 ranks: `check`, and `compile -o FILE` (the check, the lowering and the listing
// written to a file). Besides the time of a run it reports the time per plan op and the
// process's peak resident memory (maxRSS-MB, in 10^6 bytes), so the figures of a whole run can
// be read against a time and memory budget.
func BenchmarkCLIRing(b *testing.B) {
	opsRE := regexp.MustCompile(`(\d+) ops`)
	for _, ranks := range []int{256, 512, 1024} {
		for _, cmd := range []string{"check", "compile"} {
			b.Run(fmt.Sprintf("%s/ranks=%d", cmd, ranks), func(b *testing.B) {
				param := "ranks=" + strconv.Itoa(ranks)
				args := []string{"check", "-p", param, "testdata/scale/ring_allreduce.dag"}
				code, stdout, stderr, _ := cliRun(b, args...)
				m := opsRE.FindStringSubmatch(stdout)
				if code != 0 || m == nil {
					b.Fatalf("coredag %v: exit %d, no op count\n%s%s", args, code, stdout, stderr)
				}
				ops, _ := strconv.Atoi(m[1])
				out := filepath.Join(b.TempDir(), "ring.lst")
				if cmd == "compile" {
					args = []string{"compile", "-p", param, "-o", out, "testdata/scale/ring_allreduce.dag"}
				}
				var peak int64 // bytes
				for b.Loop() {
					code, _, stderr, rss := cliRun(b, args...)
					if code != 0 {
						b.Fatalf("coredag %v: exit %d\n%s", args, code, stderr)
					}
					peak = max(peak, rss)
					b.StopTimer()
					os.Remove(out)
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(ops), "ns/planop")
				b.ReportMetric(float64(peak)/1e6, "maxRSS-MB")
			})
		}
	}
}

// cliRun runs the built coredag from the repository root and returns its exit code, output and
// peak resident memory in bytes; a run still going after 2 minutes fails the benchmark.
func cliRun(b *testing.B, args ...string) (code int, stdout, stderr string, rss int64) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = filepath.Join("..", "..")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		b.Fatalf("coredag %v did not finish in 2 minutes", args)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		b.Fatal(err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss << 10 // KiB on Linux
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String(), rss
}
