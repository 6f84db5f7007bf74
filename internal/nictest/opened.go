package nictest

import "github.com/coredag/coredag/exec/nic"

// Opened wraps a provider and remembers every context it opens, so that a test can look at the
// NIC after an engine ran on it (before the session closes the contexts).
type Opened struct {
	nic.Provider
	Contexts []nic.Context
}

// Open opens rank's context on the wrapped provider and remembers it.
func (p *Opened) Open(rank int) (nic.Context, error) {
	c, err := p.Provider.Open(rank)
	if err == nil {
		p.Contexts = append(p.Contexts, c)
	}
	return c, err
}

// PendingTriggers is the triggered work waiting on each remembered context that has triggered
// work (nic.TriggerContext), by rank.
func (p *Opened) PendingTriggers() map[int]int {
	m := map[int]int{}
	for _, c := range p.Contexts {
		if tc, ok := c.(nic.TriggerContext); ok {
			m[c.Rank()] = tc.PendingTriggers()
		}
	}
	return m
}
