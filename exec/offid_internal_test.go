package exec

import (
	"strings"
	"testing"
)

// TestOffIDRoundTrip: splitOffID gives back the rank, work queue and chain index offID packed,
// up to the largest of each that offIDRoom lets through.
func TestOffIDRoundTrip(t *testing.T) {
	for _, c := range [][3]int{{0, 0, 0}, {1, 2, 3}, {1<<offRankBits - 1, 1<<offWQBits - 1, 1<<offIdxBits - 1}, {7, 1<<offWQBits - 1, 0}, {0, 0, 1<<offIdxBits - 1}} {
		id := offID(c[0], c[1], c[2])
		if id&offloadTag == 0 {
			t.Errorf("offID%v = %#x: no offload tag", c, id)
		}
		if r, wq, idx := splitOffID(id); [3]int{r, wq, idx} != c {
			t.Errorf("splitOffID(offID%v) = %d, %d, %d", c, r, wq, idx)
		}
	}
}

// TestOffIDRoom: the offload engine refuses a rank whose work request IDs would spill from one
// field into the next (a rank with 33,000 graph queues has 66,000 work queues, whose indices
// past 65,535 would name another queue and another rank), and says what to run instead.
func TestOffIDRoom(t *testing.T) {
	tests := []struct {
		name                  string
		rank, queues, longest int
		want                  string // "" for no error
	}{
		{"small", 3, 12, 40, ""},
		{"most queues", 0, 1 << 16, 1, ""},
		{"longest chain", 0, 1, 1 << 24, ""},
		{"last rank", 1<<22 - 1, 1, 1, ""},
		{"too many queues", 0, 66002, 3, "the plan has 66,002 work queues on rank 0, more than the offload engine's 65,536 (its work request IDs hold a work queue index in 16 bits): run it on the polling engine (--engine poll)"},
		{"one queue too many", 5, 1<<16 + 1, 3, "the plan has 65,537 work queues on rank 5, more than the offload engine's 65,536"},
		{"chain too long", 1, 4, 1<<24 + 1, "the plan's chain of work queue q.sq on rank 1 has 16,777,217 entries, more than the offload engine's 16,777,216 (its work request IDs hold a chain index in 24 bits): run it on the polling engine (--engine poll)"},
		{"rank too large", 1 << 22, 1, 1, "the plan has rank 4,194,304, past the offload engine's 4,194,304 ranks (its work request IDs hold a rank in 22 bits): run it on the polling engine (--engine poll)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := offIDRoom(tt.rank, tt.queues, tt.longest, "q.sq")
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("offIDRoom(%d, %d, %d) = %v, want nil", tt.rank, tt.queues, tt.longest, err)
			case tt.want != "" && err == nil:
				t.Errorf("offIDRoom(%d, %d, %d) = nil, want %q", tt.rank, tt.queues, tt.longest, tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("offIDRoom(%d, %d, %d) = %q, want it to contain %q", tt.rank, tt.queues, tt.longest, err, tt.want)
			}
		})
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 65536: "65,536", 16777216: "16,777,216", 100000: "100,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
