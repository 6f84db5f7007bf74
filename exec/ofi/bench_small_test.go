//go:build ofi && linux

package ofi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/ofi"
)

// BenchmarkSmallAllreduceShm runs the MPI bench's recursive doubling (4 ranks, 8 B and 1 KiB)
// on shm with the polling engine, every rank in this process, one iteration per op: the CPU a
// small start costs without the scheduling of 4 processes, with the sends shm completes at once
// injected and completed by coredag (inject) or left to libfabric's completions (cq).
func BenchmarkSmallAllreduceShm(b *testing.B) {
	p := openNamed(b, "shm")
	for _, n := range []int64{2, 256} {
		for _, inject := range []bool{true, false} {
			b.Run(fmt.Sprintf("bytes=%d/inject=%v", 4*n, inject), func(b *testing.B) {
				if !inject {
					old := ofi.SetInjectDone(p, 0)
					defer ofi.SetInjectDone(p, old)
				}
				_, plan := compileFile(b, "../../examples/mpi/recursive_doubling_f32.dag", map[string]int64{"ranks": 4, "n": n}, "generic")
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				s, err := exec.Prepare(ctx, plan, p, exec.Options{Engine: exec.Poll})
				require.NoError(b, err)
				defer s.Close()
				for b.Loop() {
					if _, err := s.Run(ctx, 1); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
