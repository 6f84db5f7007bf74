package decimal

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestAppend: the text is strconv's for every length of number, both signs, the ends of the
// ranges, and for a destination with and without room to spare.
func TestAppend(t *testing.T) {
	t.Parallel()
	vals := []int64{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, math.MaxInt64, math.MinInt64, -1, -10, -99, -100}
	for p := int64(1); p <= 1e18; p *= 10 {
		vals = append(vals, p-1, p, p+1, -p)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		vals = append(vals, r.Int64()>>r.IntN(63), -(r.Int64() >> r.IntN(63)))
	}
	for _, v := range vals {
		for _, dst := range [][]byte{nil, []byte("x="), make([]byte, 1, 64)} {
			want := strconv.AppendInt(append([]byte(nil), dst...), v, 10)
			if got := AppendInt(dst, v); string(got) != string(want) {
				t.Fatalf("AppendInt(%q, %d) = %q, want %q", dst, v, got, want)
			}
		}
		u := uint64(v)
		if got, want := AppendUint([]byte("u"), u), strconv.AppendUint([]byte("u"), u, 10); string(got) != string(want) {
			t.Fatalf("AppendUint(%d) = %q, want %q", u, got, want)
		}
		if got, want := Len(u), len(strconv.FormatUint(u, 10)); got != want {
			t.Fatalf("Len(%d) = %d, want %d", u, got, want)
		}
	}
	if got, want := AppendUint(nil, math.MaxUint64), strconv.FormatUint(math.MaxUint64, 10); string(got) != want {
		t.Fatalf("AppendUint(MaxUint64) = %q, want %q", got, want)
	}
}

func BenchmarkAppend(b *testing.B) {
	vals := []uint64{7, 42, 1023, 4096, 1047552, 1048576}
	buf := make([]byte, 0, 64)
	b.Run("decimal", func(b *testing.B) {
		for b.Loop() {
			for _, v := range vals {
				buf = AppendUint(buf[:0], v)
			}
		}
	})
	b.Run("strconv", func(b *testing.B) {
		for b.Loop() {
			for _, v := range vals {
				buf = strconv.AppendUint(buf[:0], v, 10)
			}
		}
	})
}
