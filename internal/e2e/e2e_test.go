package e2e

import "testing"

func TestCases(t *testing.T) {
	for _, c := range []struct {
		ci, e2e string
		want    int
	}{{"", "", 3}, {"true", "", 12}, {"", "1", 12}, {"1", "1", 12}} {
		t.Setenv("CI", c.ci)
		t.Setenv("COREDAG_E2E", c.e2e)
		if got := Cases(12, 3); got != c.want {
			t.Errorf("CI=%q COREDAG_E2E=%q: Cases(12, 3) = %d, want %d", c.ci, c.e2e, got, c.want)
		}
		if got := Enabled(); got != (c.want == 12) {
			t.Errorf("CI=%q COREDAG_E2E=%q: Enabled() = %v", c.ci, c.e2e, got)
		}
	}
}
