package verify

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
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
