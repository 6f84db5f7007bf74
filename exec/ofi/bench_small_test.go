//go:build ofi && linux

package ofi_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/ofi"
)

// BenchmarkSmallAllreduceShm runs the MPI bench's recursive doubling (4 ranks, 8 B and 1 KiB)
// on shm with the polling engine, every rank in this process, one Start and Wait of the
// persistent Op per op (the library's path, which allocates nothing): the CPU a small start
// costs without the scheduling of 4 processes, with the sends shm completes at once injected
// and completed by coredag (inject) or left to libfabric's completions (cq). Pinned to one
// core (taskset -c 1), run to run spread falls from 15-35% to 3-5% at 8 B.
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
				op, err := exec.NewOp(plan, p, exec.Options{Engine: exec.Poll})
				require.NoError(b, err)
				defer op.Close()
				data := make([][]float32, 4)
				for r := range data {
					data[r] = make([]float32, n)
					require.NoError(b, op.Bind(r, 0, exec.Region{Addr: unsafe.Pointer(&data[r][0]), Len: 4 * int(n)}))
				}
				for b.Loop() {
					if err := op.Start(); err != nil {
						b.Fatal(err)
					}
					if err := op.Wait(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				runtime.KeepAlive(data) // the Op holds its addresses, not references
			})
		}
	}
}
