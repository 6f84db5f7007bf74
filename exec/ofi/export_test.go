//go:build ofi && linux

package ofi

// SetInjectDone overrides the largest send the provider injects and completes itself (0: none)
// for the endpoints created from now on, and returns what it was.
func SetInjectDone(p *Provider, n uint64) (old uint64) {
	old, p.injectDone = p.injectDone, n
	return old
}

// OpenCQs is how many CQs of p are open.
func OpenCQs(p *Provider) int64 { return p.ncq.Load() }
