//go:build !(ofi && linux)

package ofi

import "github.com/coredag/coredag/exec/nic"

// Available reports whether this binary was built with libfabric support.
const Available = false

// New returns ErrNotBuilt: this binary was built without the ofi build tag.
func New(opts Options) (nic.Provider, error) {
	return nil, ErrNotBuilt
}

// Listed reports false: this binary has no libfabric.
func Listed(name string) bool { return false }
