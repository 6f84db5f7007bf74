package msccl_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/coredag/coredag/planner"
)

// BenchmarkCheckRing is `coredag check` of msccl-tools' fused ring allreduce (2n-1 steps per
// GPU, n GPUs): parse the XML, build the plan, elaborate, verify and prove the postcondition.
// Per step, the front end is linear when ns/step and cpu-ns/step stay flat as the GPUs grow;
// cpu-ns/step (the process's CPU time, garbage collection included) is the steadier of the two
// on a shared machine.
func BenchmarkCheckRing(b *testing.B) {
	for _, n := range []int{8, 64, 256} {
		src := ringAllreduce(n, 1).xml()
		steps := float64(n * (2*n - 1))
		b.Run(fmt.Sprintf("gpus=%d", n), func(b *testing.B) {
			cpu0 := cpuTime(b)
			for b.Loop() {
				g, err := planner.Load(b.Context(), "ring.xml", src, nil, planner.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if len(g.Expects) != 1 {
					b.Fatal("no postcondition")
				}
			}
			per := float64(b.N) * steps
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/step")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/per, "cpu-ns/step")
			b.ReportMetric(steps, "steps")
		})
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
