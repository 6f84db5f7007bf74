package english

import "testing"

func TestPlural(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{{1, "recv", "1 recv"}, {3, "recv", "3 recvs"}, {2, "entry", "2 entries"}, {2, "mismatch", "2 mismatches"},
		{0, "box", "0 boxes"}, {2, "day", "2 days"}, {2, "bus", "2 buses"}, {2, "wish", "2 wishes"}} {
		if got := Plural(c.n, c.noun); got != c.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
