package softnic

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

// TestZeroAllocs guards the hot path: posting and polling allocate nothing, in both progress
// modes, for one-sided and two-sided requests and for cross-channel entries.
func TestZeroAllocs(t *testing.T) {
	for _, opts := range []Options{{}, {Seeded: true, Seed: 3}} {
		sn := New(opts)
		a, b := pair(t, sn, allAccess, nic.QPConfig{CrossChannel: true, MaxInline: 64})
		addr, key := b.remote(0)
		wrs := []nic.SendWR{
			{ID: 1, Op: nic.OpRDMAWrite, Local: a.sge(0, 1024), RemoteAddr: addr, RKey: key},
			{ID: 2, Op: nic.OpSend, Flags: nic.FlagInline, Local: nic.SGE{Addr: a.mr.Addr(), Len: 32}},
			{ID: 3, Op: nic.OpCQEWait, WaitCQ: a.scq.Num()}, // the previous round's atomic
			{ID: 4, Op: nic.OpAtomicFAdd, Local: a.sge(64, 8), RemoteAddr: addr, RKey: key, CompareAdd: 1, Flags: nic.FlagSignaled},
		}
		rwr := []nic.RecvWR{{ID: 9, Local: b.sge(2048, 64)}}
		wc := make([]nic.WC, 8)
		rounds := uint32(0)
		allocs := testing.AllocsPerRun(200, func() {
			wrs[2].Count = rounds
			rounds++
			if _, err := b.qp.PostRecv(rwr); err != nil {
				panic(err)
			}
			if _, err := a.qp.PostSend(wrs); err != nil {
				panic(err)
			}
			if n, err := a.scq.Poll(wc); n != 1 || err != nil {
				panic(fmt.Sprint("no send completion: ", err, sn.Stalls()))
			}
			if n, _ := b.rcq.Poll(wc); n != 1 {
				panic("no receive completion")
			}
		})
		assert.Zero(t, allocs, "seeded=%v", opts.Seeded)
		assert.Empty(t, sn.Faults())
	}
}

// BenchmarkDataPath moves one large message per operation through the software NIC and, side by
// side in the same benchmark, copies the same bytes with copy(), reporting both rates and their
// ratio (1 means the NIC costs nothing beyond the copy).
func BenchmarkDataPath(b *testing.B) {
	for _, op := range []nic.Opcode{nic.OpRDMAWrite, nic.OpSend, nic.OpRDMARead} {
		for _, size := range []int{64 << 10, 1 << 20, 4 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", op, size>>10), func(b *testing.B) {
				sn := New(Options{})
				cfg := nic.QPConfig{SendDepth: 16, RecvDepth: 16}
				x, y := newBenchEnd(b, sn, 0, size, cfg), newBenchEnd(b, sn, 1, size, cfg)
				require.NoError(b, x.qp.Connect(y.qp.Info()))
				require.NoError(b, y.qp.Connect(x.qp.Info()))
				fill(x.mr.Bytes(), 1)
				addr, key := y.remote(0)
				wr := []nic.SendWR{{ID: 1, Op: op, Flags: nic.FlagSignaled, Local: x.sge(0, size), RemoteAddr: addr, RKey: key}}
				rwr := []nic.RecvWR{{ID: 2, Local: y.sge(0, size)}}
				wc := make([]nic.WC, 4)
				src, dst := x.mr.Bytes(), y.mr.Bytes() // the same bytes the NIC moves
				var nicTime, copyTime time.Duration
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					if op == nic.OpSend {
						if _, err := y.qp.PostRecv(rwr); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := x.qp.PostSend(wr); err != nil {
						b.Fatal(err)
					}
					if n, err := x.scq.Poll(wc); n != 1 || err != nil || wc[0].Status != nic.StatusSuccess {
						b.Fatalf("poll: %d %v %v", n, err, wc[0])
					}
					if op == nic.OpSend {
						y.rcq.Poll(wc)
					}
					t1 := time.Now()
					if op == nic.OpRDMARead {
						copy(src, dst)
					} else {
						copy(dst, src)
					}
					copyTime += time.Since(t1)
					nicTime += t1.Sub(t0)
				}
				reportRates(b, float64(size)*float64(b.N), nicTime, copyTime)
			})
		}
	}
}

func reportRates(b *testing.B, bytes float64, nicTime, copyTime time.Duration) {
	nicGBs := bytes / nicTime.Seconds() / 1e9
	copyGBs := bytes / copyTime.Seconds() / 1e9
	b.ReportMetric(nicGBs, "nic-GB/s")
	b.ReportMetric(copyGBs, "copy-GB/s")
	b.ReportMetric(nicGBs/copyGBs, "nic/copy")
}

func newBenchEnd(b *testing.B, sn *NIC, rank, size int, cfg nic.QPConfig) *end {
	e := &end{}
	var err error
	e.ctx, err = sn.Open(rank)
	require.NoError(b, err)
	e.pd, _ = e.ctx.AllocPD()
	e.scq, _ = e.ctx.CreateCQ(64)
	e.rcq, _ = e.ctx.CreateCQ(64)
	e.mr, err = e.pd.AllocMR(size, allAccess)
	require.NoError(b, err)
	cfg.SendCQ, cfg.RecvCQ = e.scq, e.rcq
	e.qp, err = e.pd.CreateQP(cfg)
	require.NoError(b, err)
	return e
}

// BenchmarkSmallOps measures the per-request cost of the fabric: a batch of 64 small signalled
// writes per operation, posted with one call and polled in batches.
func BenchmarkSmallOps(b *testing.B) {
	for _, opts := range []Options{{}, {Seeded: true, Seed: 1}} {
		b.Run(fmt.Sprintf("seeded=%v", opts.Seeded), func(b *testing.B) {
			sn := New(opts)
			cfg := nic.QPConfig{SendDepth: 128, RecvDepth: 16}
			x, y := newBenchEnd(b, sn, 0, 4096, cfg), newBenchEnd(b, sn, 1, 4096, cfg)
			require.NoError(b, x.qp.Connect(y.qp.Info()))
			require.NoError(b, y.qp.Connect(x.qp.Info()))
			addr, key := y.remote(0)
			wrs := make([]nic.SendWR, 64)
			for i := range wrs {
				wrs[i] = nic.SendWR{ID: uint64(i), Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: x.sge(i*8, 8), RemoteAddr: addr + uint64(i*8), RKey: key}
			}
			wc := make([]nic.WC, 64)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := x.qp.PostSend(wrs); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < len(wrs); {
					n, err := x.scq.Poll(wc)
					if err != nil || n == 0 {
						b.Fatalf("poll: %d %v", n, err)
					}
					got += n
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(wrs)), "ns/wqe")
		})
	}
}
