package exec

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
)

func TestReferenceRingAllreduce(t *testing.T) {
	for _, ranks := range []int{1, 2, 3, 4, 8} {
		g := ringAllreduce(ranks, 5)
		m, err := Reference(g)
		require.NoError(t, err, "ranks=%d", ranks)
		want := float64(ranks * (ranks + 1) / 2)
		for r := 0; r < ranks; r++ {
			for i, v := range m.Float64s(r, 0) {
				require.Equal(t, want, v, "ranks=%d rank %d data[%d]", ranks, r, i)
			}
		}
	}
}

// exchange is LOWERING.md's example: two ranks swap contributions, sum, and swap the sums.
func exchange() *ir.Graph {
	b := newBuild("exchange", 2)
	a := b.buffer("a", ir.F32, 4, 0, func(r int, _ int64) float64 { return float64(r + 1) })
	tb := b.buffer("t", ir.F32, 4, 0, nil)
	b.forEach(func(rb *rankB) {
		rb.queue("q", (rb.r+1)%2, "")
		rb.op("tx", opSpec{Kind: ir.OpSend, Q: "q", Src: sl(a, 0, 4)})
		rb.op("rx", opSpec{Kind: ir.OpRecv, Q: "q", Dst: sl(tb, 0, 4)})
		rb.op("red", opSpec{Kind: ir.OpReduce, Red: ir.RedSum, Dst: sl(a, 0, 4), Src: sl(tb, 0, 4), After: []string{"rx"}})
		rb.op("tx2", opSpec{Kind: ir.OpSend, Q: "q", Src: sl(a, 0, 4), After: []string{"red"}})
		rb.op("rx2", opSpec{Kind: ir.OpRecv, Q: "q", Dst: sl(tb, 0, 4), After: []string{"red"}})
	})
	return b.done()
}

func TestReferenceExchange(t *testing.T) {
	m, err := Reference(exchange())
	require.NoError(t, err)
	for r := 0; r < 2; r++ {
		assert.Equal(t, []float64{3, 3, 3, 3}, m.Float64s(r, 0), "rank %d a", r)
		assert.Equal(t, []float64{3, 3, 3, 3}, m.Float64s(r, 1), "rank %d t (the peer's sum)", r)
	}
}

func TestReferenceOneSided(t *testing.T) {
	b := newBuild("onesided", 2)
	src := b.buffer("src", ir.I64, 4, ir.RemoteRead, func(r int, i int64) float64 { return float64(10*r + int(i)) })
	dst := b.buffer("dst", ir.I64, 4, ir.RemoteWrite, nil)
	ctr := b.buffer("ctr", ir.U64, 2, ir.RemoteAtomic, func(r int, i int64) float64 { return float64(100 + r) })
	got := b.buffer("got", ir.U64, 3, 0, nil)
	b.forEach(func(rb *rankB) {
		rb.queue("q", 1-rb.r, "")
		rb.queue("lo", rb.r, "") // loopback
		if rb.r == 0 {
			rb.op("w", opSpec{Kind: ir.OpWrite, Q: "q", Src: sl(src, 0, 2), Dst: sl(dst, 2, 4)})
			rb.op("rd", opSpec{Kind: ir.OpRead, Q: "q", Src: sl(src, 1, 3), Dst: sl(dst, 0, 2)})
			rb.op("fa", opSpec{Kind: ir.OpAtomicAdd, Q: "q", Dst: sl(ctr, 0, 1), A: 5, Fetch: sl(got, 0, 1)})
			rb.op("cs", opSpec{Kind: ir.OpAtomicCAS, Q: "q", Dst: sl(ctr, 0, 1), A: 106, B: 7, Fetch: sl(got, 1, 2), After: []string{"fa"}})
			rb.op("miss", opSpec{Kind: ir.OpAtomicCAS, Q: "q", Dst: sl(ctr, 1, 2), A: 5, B: 9, Fetch: sl(got, 2, 3)})
			rb.op("neg", opSpec{Kind: ir.OpAtomicAdd, Q: "lo", Dst: sl(ctr, 1, 2), A: -101})
		}
	})
	m, err := Reference(b.done())
	require.NoError(t, err)
	assert.Equal(t, []any{int64(0), int64(0), int64(0), int64(1)}, m.Values(1, dst), "rank 1 dst: rank 0's src[0:2] written at 2:4")
	assert.Equal(t, []any{int64(11), int64(12), int64(0), int64(0)}, m.Values(0, dst), "rank 0 dst: read from rank 1 src[1:3]")
	assert.Equal(t, []any{uint64(7), uint64(101)}, m.Values(1, ctr), "rank 1 ctr: 101+5=106, then cas 106->7; the missed cas left 101")
	assert.Equal(t, []any{uint64(100), uint64(math.MaxUint64)}, m.Values(0, ctr), "rank 0 ctr: loopback add of -101 to 100 wraps")
	assert.Equal(t, []any{uint64(101), uint64(106), uint64(101)}, m.Values(0, got), "fetched old values")
}

func TestReduceTypes(t *testing.T) {
	enc := func(ty ir.ElemType, vs ...float64) []byte {
		out := make([]byte, int64(len(vs))*ty.Size())
		for i, v := range vs {
			putElem(ty, out, int64(i), v)
		}
		return out
	}
	tests := []struct {
		name string
		ty   ir.ElemType
		op   ir.ReduceOp
		dst  []float64
		src  []float64
		want []any
	}{
		{"f32 sum", ir.F32, ir.RedSum, []float64{1.5, -2}, []float64{2.25, 2}, []any{3.75, 0.0}},
		{"f64 prod", ir.F64, ir.RedProd, []float64{3, -0.5}, []float64{4, 8}, []any{12.0, -4.0}},
		{"f32 min", ir.F32, ir.RedMin, []float64{3, -1}, []float64{4, -8}, []any{3.0, -8.0}},
		{"f64 max", ir.F64, ir.RedMax, []float64{3, -1}, []float64{4, -8}, []any{4.0, -1.0}},
		{"u8 sum wraps", ir.U8, ir.RedSum, []float64{250, 1}, []float64{10, 2}, []any{uint64(4), uint64(3)}},
		{"u8 prod wraps", ir.U8, ir.RedProd, []float64{16, 3}, []float64{17, 5}, []any{uint64(16), uint64(15)}},
		{"i32 sum wraps", ir.I32, ir.RedSum, []float64{math.MaxInt32, -5}, []float64{1, 2}, []any{int64(math.MinInt32), int64(-3)}},
		{"i32 min signed", ir.I32, ir.RedMin, []float64{-3, 7}, []float64{2, -9}, []any{int64(-3), int64(-9)}},
		{"u32 max unsigned", ir.U32, ir.RedMax, []float64{-1, 7}, []float64{2, 9}, []any{uint64(math.MaxUint32), uint64(9)}},
		{"i64 band", ir.I64, ir.RedBand, []float64{0b1100, -1}, []float64{0b1010, 6}, []any{int64(0b1000), int64(6)}},
		{"u64 bor", ir.U64, ir.RedBor, []float64{0b1100, 1}, []float64{0b1010, 2}, []any{uint64(0b1110), uint64(3)}},
		{"u32 bxor", ir.U32, ir.RedBxor, []float64{0b1100, 5}, []float64{0b1010, 5}, []any{uint64(0b0110), uint64(0)}},
		{"i64 prod wraps", ir.I64, ir.RedProd, []float64{1 << 62, 3}, []float64{4, -3}, []any{int64(0), int64(-9)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, portable := range []bool{false, true} {
				dst, src := enc(tt.ty, tt.dst...), enc(tt.ty, tt.src...)
				if portable {
					reducePortable(tt.ty, tt.op, dst, src)
				} else {
					require.NoError(t, Reduce(tt.ty, tt.op, dst, src))
				}
				for i, w := range tt.want {
					assert.Equal(t, w, elemValue(tt.ty, dst, int64(i)), "element %d (portable=%v)", i, portable)
				}
			}
		})
	}
	assert.Error(t, Reduce(ir.F32, ir.RedBand, make([]byte, 4), make([]byte, 4)))
	assert.Error(t, Reduce(ir.F32, ir.RedSum, make([]byte, 4), make([]byte, 8)))
}

// TestReduceSumLengths: the sum, eight elements a step, equals the element-by-element portable
// path at every length around its steps, on every type, with values that overflow and round.
func TestReduceSumLengths(t *testing.T) {
	for _, ty := range []ir.ElemType{ir.U8, ir.I32, ir.U32, ir.I64, ir.U64, ir.F32, ir.F64} {
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65} {
			dst, src := make([]byte, int64(n)*ty.Size()), make([]byte, int64(n)*ty.Size())
			for i := range n {
				putElem(ty, dst, int64(i), float64(i*i)*1.37+250)
				putElem(ty, src, int64(i), float64(i)*-3.1+1e9)
			}
			want := slices.Clone(dst)
			reducePortable(ty, ir.RedSum, want, src)
			require.NoError(t, Reduce(ty, ir.RedSum, dst, src))
			require.Equal(t, want, dst, "%s, %d elements", ty, n)
		}
	}
}

// BenchmarkReduceSumF32 measures the f32 sum of a slice in cache (64 KiB) and of one larger than
// the caches (4 MiB).
func BenchmarkReduceSumF32(b *testing.B) {
	for _, size := range []int{64 << 10, 4 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			dst, src := alignedBytes(int64(size)), alignedBytes(int64(size))
			b.SetBytes(int64(size))
			for i := 0; i < b.N; i++ {
				if err := Reduce(ir.F32, ir.RedSum, dst, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestReferenceFaults(t *testing.T) {
	tests := []struct {
		name  string
		build func() *ir.Graph
		want  string
	}{
		{"write without remote_write", func() *ir.Graph {
			b := newBuild("perm", 2)
			x := b.buffer("x", ir.U8, 8, 0, nil)
			b.forEach(func(rb *rankB) {
				rb.queue("q", 1-rb.r, "")
				if rb.r == 0 {
					rb.op("w", opSpec{Kind: ir.OpWrite, Q: "q", Src: sl(x, 0, 8), Dst: sl(x, 0, 8)})
				}
			})
			return b.done()
		}, `perm.dag:3:1: op w on rank 0, queue q: remote access error: x on rank 1 is not remote_write`},
		{"read out of bounds", func() *ir.Graph {
			b := newBuild("oob", 2)
			x := b.buffer("x", ir.U8, 8, ir.RemoteRead, nil)
			b.forEach(func(rb *rankB) {
				rb.queue("q", 1-rb.r, "")
				if rb.r == 1 {
					rb.op("rd", opSpec{Kind: ir.OpRead, Q: "q", Src: sl(x, 4, 12), Dst: sl(x, 0, 8)})
				}
			})
			return b.done()
		}, `op rd on rank 1, queue q: remote access to rank 0: slice x\[4:12\] is out of bounds`},
		{"send without recv", func() *ir.Graph {
			b := newBuild("unmatched", 2)
			b.forEach(func(rb *rankB) {
				rb.queue("q", 1-rb.r, "")
				if rb.r == 0 {
					rb.op("lonely", opSpec{Kind: ir.OpSend, Q: "q"})
				}
			})
			return b.done()
		}, `op lonely on rank 0, queue q: send has no matching recv on rank 1`},
		{"cycle", func() *ir.Graph {
			b := newBuild("cycle", 1)
			b.forEach(func(rb *rankB) {
				rb.op("a", opSpec{Kind: ir.OpNop, After: []string{"b"}})
				rb.op("b", opSpec{Kind: ir.OpNop, After: []string{"a"}})
			})
			return b.done()
		}, `op a on rank 0: is on a dependency cycle`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Reference(tt.build())
			require.Error(t, err)
			var oe *OpError
			require.ErrorAs(t, err, &oe)
			assert.Regexp(t, tt.want, err.Error())
		})
	}
}

func TestDiffNamesFirstElement(t *testing.T) {
	g := ringAllreduce(2, 3)
	want, err := Reference(g)
	require.NoError(t, err)
	got := NewMemory(g)
	got.CopyFrom(want)
	assert.Empty(t, got.Diff(want))
	putElem(ir.F32, got.Bytes(1, 0), 4, 7)
	putElem(ir.F32, got.Bytes(1, 0), 5, 8)
	d := got.Diff(want)
	require.Len(t, d, 1)
	assert.Equal(t, "rank 1 buffer data element 4 is 7, the reference has 3 (2 elements differ)", d[0].String())
	assert.EqualError(t, DiffError(d), "memory differs from the reference: "+d[0].String())
}
