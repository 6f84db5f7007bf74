package ofi

import "testing"

// TestUniverse: a verbs provider gets FI_UNIVERSE_SIZE from the plan's world size, at least 64,
// unless the environment sets it; other providers, or an unknown world size, get none.
func TestUniverse(t *testing.T) {
	unset := func(string) (string, bool) { return "", false }
	set := func(k string) (string, bool) { return "512", k == "FI_UNIVERSE_SIZE" }
	for _, c := range []struct {
		prov   string
		ranks  int
		lookup func(string) (string, bool)
		want   string
		ok     bool
	}{
		{"verbs;ofi_rxm", 4, unset, "64", true},
		{"verbs", 2, unset, "64", true},
		{"verbs;ofi_rxm", 100, unset, "100", true},
		{"verbs;ofi_rxm", 4, set, "", false},
		{"verbs;ofi_rxm", 0, unset, "", false},
		{"tcp;ofi_rxm", 4, unset, "", false},
		{"shm", 4, unset, "", false},
		{"", 4, unset, "", false},
	} {
		o := DefaultOptions()
		o.Provider, o.Ranks = c.prov, c.ranks
		got, ok := o.Universe(c.lookup)
		if got != c.want || ok != c.ok {
			t.Errorf("%q at %d ranks: got %q, %v; want %q, %v", c.prov, c.ranks, got, ok, c.want, c.ok)
		}
	}
}
