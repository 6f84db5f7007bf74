package exec

import (
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coredag/coredag/ir"
)

// pinThread locks the calling goroutine to its thread and that thread to cpu; unpin restores
// the thread's CPUs and unlocks it.
func pinThread(cpu int) (unpin func(), err error) {
	runtime.LockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return func() {
		_ = unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	}, nil
}

var readSink byte

// BenchmarkReduceSumShared measures the f32 sum into a dst that a thread on the other core has
// just read, as a peer's copy of what a rank sent has in an allreduce (shared), against a dst
// only this core touched. Run it with -benchtime Nx: the read between sums is not timed.
func BenchmarkReduceSumShared(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs two cores")
	}
	for _, shared := range []bool{true, false} {
		for _, size := range []int{64 << 10, 256 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("shared=%v/%dKiB", shared, size>>10), func(b *testing.B) {
				dst, src := alignedBytes(int64(size)), alignedBytes(int64(size))
				read, done := make(chan struct{}), make(chan error)
				go func() {
					unpin, err := pinThread(1)
					done <- err
					if err != nil {
						return
					}
					defer unpin()
					for range read {
						var sum byte
						for i := 0; i < len(dst); i += 64 {
							sum += dst[i]
						}
						readSink = sum // keeps the loads
						done <- nil
					}
				}()
				if err := <-done; err != nil {
					b.Skipf("sched_setaffinity: %v", err)
				}
				defer close(read)
				unpin, err := pinThread(0)
				if err != nil {
					b.Skipf("sched_setaffinity: %v", err)
				}
				defer unpin()
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if shared {
						b.StopTimer()
						read <- struct{}{}
						<-done
						b.StartTimer()
					}
					if err := Reduce(ir.F32, ir.RedSum, dst, src); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
