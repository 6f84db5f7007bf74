package verify

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/stoptest"
	"github.com/coredag/coredag/ir"
)

// wordPlan is a plan of two ranks in which rank 1 makes the atomic adds adds (op statements)
// to the word of rank 0, of type typ and init init, and rank 0 waits for it to reach value.
func wordPlan(typ, init, adds, value string) string {
	return fmt.Sprintf(`plan p
param ranks = 2
buffer word %s[1] remote_atomic init %s
queue q to 1 - rank
if rank == 0 {
  op w = wait word[0] >= %s
} else {
%s}
`, typ, init, value, adds)
}

// TestWaitWords: a wait's word only grows when its adds cannot take it past the largest value of
// its type (where it would wrap around), and the checks weigh its start, its adds and its
// threshold as the engines compare them, in the 64 bits of its type: signed for an i64,
// unsigned for a u64. Before, they added in int64 and did not look for the wrap: a word that
// wraps passed (and the wait hung), and a u64 word that grows past 2^63 - 1 without wrapping
// was refused, its adds said to bring a negative total.
func TestWaitWords(t *testing.T) {
	t.Parallel()
	const (
		max63 = "9223372036854775807"
		add1  = "  op a1 = atomic add q word[0] 1\n"
		add63 = "  op a1 = atomic add q word[0] " + max63 + "\n"
		twice = add63 + "  op a2 = atomic add q word[0] " + max63 + "\n"
		at    = "t.dag:6:15: "
	)
	tests := []struct {
		name string
		src  string
		want []string // the errors, positioned
	}{
		{
			name: "i64 at its largest value, then an add",
			src:  wordPlan("i64", max63, add1, "5"),
			want: []string{at + "wait w on rank 0 watches word, which starts at 9223372036854775807 and to which the atomic adds bring 1 in all: past 9223372036854775807, the largest i64, it wraps around, so its value does not only grow (start it lower, or add less) (on rank 0)"},
		},
		{
			name: "u64 past 2^63 - 1 and within its type",
			src:  wordPlan("u64", "0", twice, max63),
		},
		{
			name: "u64 past its largest value",
			src:  wordPlan("u64", "0", twice+"  op a3 = atomic add q word[0] "+max63+"\n", max63),
			want: []string{at + "wait w on rank 0 watches word, which starts at 0 and to which the atomic adds bring 27670116110564327421 in all: past 18446744073709551615, the largest u64, it wraps around, so its value does not only grow (start it lower, or add less) (on rank 0)"},
		},
		{
			name: "u64 at its largest value, then an add",
			src:  wordPlan("u64", "-1", add1, "5"),
			want: []string{at + "wait w on rank 0 watches word, which starts at 18446744073709551615 and to which the atomic adds bring 1 in all: past 18446744073709551615, the largest u64, it wraps around, so its value does not only grow (start it lower, or add less) (on rank 0)"},
		},
		{
			name: "i64 from its smallest value to its largest",
			src:  wordPlan("i64", "-"+max63+" - 1", twice+"  op a3 = atomic add q word[0] 1\n", max63),
		},
		{
			name: "i64 one short of its largest value",
			src:  wordPlan("i64", "-"+max63+" - 1", twice, max63),
			want: []string{at + "wait w on rank 0 waits for word to reach 9223372036854775807, but it starts at -9223372036854775808 and the atomic adds to it bring 18446744073709551614 in all: it can never complete (wait for less, or add the missing adds) (on rank 0)"},
		},
		{
			// A u64 word's threshold is unsigned, as the engines compare it: -1 is its largest
			// value, which the word does not start at.
			name: "u64 threshold read unsigned",
			src:  wordPlan("u64", "0", twice, "-1"),
			want: []string{at + "wait w on rank 0 waits for word to reach 18446744073709551615, but it starts at 0 and the atomic adds to it bring 18446744073709551614 in all: it can never complete (wait for less, or add the missing adds) (on rank 0)"},
		},
		{
			name: "i64 reached at its start",
			src:  wordPlan("i64", "-5", add1, "-7"),
		},
		{
			name: "i64 up to its largest value",
			src:  wordPlan("i64", "9223372036854775806", add1, max63),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, d := range Check(t.Context(), graphOf(t, tt.src)) {
				got = append(got, d.Error())
			}
			assert.Equal(t, tt.want, got, "%s", tt.src)
		})
	}
}

// TestLandIndex: the ops landIndex finds for a region are those whose slices meet it, the ends
// included, as a look through every op finds them; among them, every op that newWaiter acts on
// (one that overlaps the region, or that counts for a wait on it). Writes, atomics and copies
// land in random slices of a small buffer, empty ones too, and every region of it is looked up.
func TestLandIndex(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 0))
	const n = 12
	for plan := range 30 {
		var src strings.Builder
		fmt.Fprintf(&src, "plan p\nparam ranks = 2\nbuffer src u64[%d]\nbuffer dst u64[%d] remote_write remote_atomic\nqueue q to 1 - rank\n", n, n)
		src.WriteString("op word = wait dst[0] >= 1\n") // so that the local writes are indexed too
		for i := range 40 {
			off, l := rng.IntN(n+1), 0
			if off < n {
				l = rng.IntN(min(4, n-off) + 1)
			}
			switch rng.IntN(4) {
			case 0:
				fmt.Fprintf(&src, "op x%d = write q src[0:%d] to dst[%d:%d]\n", i, l, off, off+l)
			case 1:
				fmt.Fprintf(&src, "op x%d = copy src[0:%d] to dst[%d:%d]\n", i, l, off, off+l)
			case 2:
				fmt.Fprintf(&src, "op x%d = atomic add q dst[%d] 1\n", i, min(off, n-1))
			default:
				fmt.Fprintf(&src, "op x%d = atomic cas q dst[%d] 0 1\n", i, min(off, n-1))
			}
		}
		g := graphOf(t, src.String())
		ix := newLandIndex(g)
		require.NotNil(t, ix.local)
		dst := g.Ops[0].Dst.Buf
		for r := range 2 {
			for lo := int64(0); lo <= n; lo++ {
				for hi := lo; hi <= n; hi++ {
					region := ir.Slice{Buf: dst, Off: lo, Len: hi - lo}
					for _, word := range []bool{false, true} {
						meets := func(s ir.Slice) bool { return s.Valid() && s.Buf == dst && s.Off <= hi && s.Off+s.Len >= lo }
						var want, acts []ir.OpID
						for i := range g.Ops {
							x, id := &g.Ops[i], ir.OpID(i)
							remote := (x.Kind == ir.OpWrite || x.Kind.IsAtomic()) && landRank(g, x) == r
							local := word && int(x.Rank) == r && slices.ContainsFunc(localWrites(x), meets)
							if remote && meets(x.Dst) || local {
								want = append(want, id)
							}
							if x.Kind.OnQueue() && landRank(g, x) == r && (x.Dst.Valid() && x.Dst.Overlaps(region) || g.LandWeight(id, r, region, word) > 0) ||
								word && int(x.Rank) == r && slices.ContainsFunc(localWrites(x), func(s ir.Slice) bool { return s.Valid() && s.Overlaps(region) }) {
								acts = append(acts, id)
							}
						}
						got := append([]ir.OpID(nil), ix.find(r, region, word)...)
						require.Equal(t, want, got, "plan %d, rank %d, %s, word %v:\n%s", plan, r, g.SliceString(region), word, src.String())
						for _, id := range acts {
							require.Contains(t, got, id, "plan %d, rank %d, %s, word %v:\n%s", plan, r, g.SliceString(region), word, src.String())
						}
					}
				}
			}
		}
	}
}

// waitsPlan is a plan of k writes on each rank, and k waits for them, each for the one write
// into its own element: as many waits as writes.
func waitsPlan(t testing.TB, k int) *ir.Graph {
	return graphOf(t, fmt.Sprintf(`plan waits
param ranks = 2
buffer src u64[%d] init i
buffer dst u64[%d] remote_write
queue q to 1 - rank depth 32768
for i in 0 .. %d {
  op w[i] = write q src[i : i + 1] to dst[i : i + 1]
  op g[i] = wait 1 writes to dst[i : i + 1]
}
`, k, k, k))
}

// TestWaitsStopped: stopped by its context, at its first look or half way, resolveWaits returns
// nothing and leaves g.Lands unset; a later call with a live context finds what a first one
// does. Its first look comes as it finds the waits' contributors: before, that step looked at
// no context, and a check of many waits could not be stopped until it was through.
func TestWaitsStopped(t *testing.T) {
	t.Parallel()
	const k = 3000
	fresh := waitsPlan(t, k)
	all := stoptest.CancelAt(0)
	require.Empty(t, resolveWaits(all, fresh))
	require.Len(t, fresh.Lands, 2*k)
	looks := all.Count()
	require.Greater(t, looks, int64(2*2*k), "a look per wait in each of the two rounds, and some as the contributors are found")
	for _, at := range []int64{1, looks / 2} {
		g := waitsPlan(t, k)
		ctx := stoptest.CancelAt(at)
		assert.Empty(t, resolveWaits(ctx, g), "cancelled at look %d of %d", at, looks)
		assert.Nil(t, g.Lands, "cancelled at look %d of %d", at, looks)
		assert.LessOrEqual(t, ctx.Count(), at+1, "no look after the one that found it cancelled (which asks for its cause)")
		require.Empty(t, resolveWaits(t.Context(), g))
		assert.Equal(t, fresh.Lands, g.Lands)
	}
}

// BenchmarkResolveWaits finds the orders of k waits, each for one of k writes: the time per
// wait stays about the same as k grows (before, newWaiter went through every op for each wait).
func BenchmarkResolveWaits(b *testing.B) {
	for _, k := range []int{1000, 4000, 16000} {
		g := waitsPlan(b, k)
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				g.Lands = nil
				if errs := resolveWaits(b.Context(), g); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*k), "ns/wait")
		})
	}
}
