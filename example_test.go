package coredag_test

import (
	"context"
	"fmt"
	"log"

	"github.com/coredag/coredag"
)

// A ring allreduce on the caller's arrays, every rank in this process (a nil World): each
// iteration writes fresh data, runs the plan and compares it with a serial sum.
func Example() {
	const ranks, n = 4, 256 // n elements per chunk: ranks*n per rank
	plan, err := coredag.Open("plans/ring_allreduce.dag", coredag.Options{
		Params: map[string]int64{"ranks": ranks, "n": n},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer plan.Close()
	coll, err := plan.Init(context.Background(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer coll.Close()
	data := make([][]float32, ranks)
	for r := range data {
		data[r] = make([]float32, ranks*n)
		if err := coredag.BindSlice(coll, r, "data", data[r]); err != nil {
			log.Fatal(err)
		}
	}
	bad := 0
	for it := 0; it < 20; it++ {
		want := make([]float32, ranks*n)
		for r := range data {
			for i := range data[r] {
				data[r][i] = float32((r+1)*(i%7) + it) // small integers: the sum is exact
				want[i] += data[r][i]
			}
		}
		if err := coll.Start(); err != nil {
			log.Fatal(err)
		}
		if err := coll.Wait(context.Background()); err != nil {
			log.Fatal(err)
		}
		for r := range data {
			for i := range want {
				if data[r][i] != want[i] {
					bad++
				}
			}
		}
	}
	fmt.Printf("%s engine, 20 iterations on %d ranks: %d elements differ from the serial sum\n", coll.Engine(), ranks, bad)
	// Output: offload engine, 20 iterations on 4 ranks: 0 elements differ from the serial sum
}

// A plan set picks the plan for each message size, and sets the plan's n so that its buffer
// holds the message, whatever the plan makes of n: the recursive doubling's data is f32[n], the
// three-step Rabenseifner's f32[ranks * n].
func ExampleOpenSet() {
	set, err := coredag.OpenSet("examples/mpi/sockets.set")
	if err != nil {
		log.Fatal(err)
	}
	for _, size := range []int64{4 << 10, 1 << 20} {
		plan, err := set.Open(size, 4, coredag.Options{})
		if err != nil {
			log.Fatal(err)
		}
		b := plan.Buffers()[0]
		fmt.Printf("%d B: plan %s, buffer %s of %d f32\n", size, plan.Name(), b.Name, b.Count)
		plan.Close()
	}
	_, err = set.Open(1<<20+4, 4, coredag.Options{}) // not a multiple of 4 blocks of f32
	fmt.Println(err)
	// Output:
	// 4096 B: plan recursive_doubling_f32, buffer data of 1024 f32
	// 1048576 B: plan rabenseifner_merged_f32, buffer data of 262144 f32
	// coredag: invalid argument: examples/mpi/rabenseifner_merged_f32.dag moves 16 B per unit of n with these params (ranks 4): a message of 1048580 B is not a multiple of it; pad it to 1048592 B; or set n in the params
}
