//go:build !(verbs && linux)

package verbs

import "github.com/coredag/coredag/exec/nic"

// Available reports whether this binary was built with verbs support.
const Available = false

// New returns ErrNotBuilt: this binary was built without the verbs build tag.
func New(opts Options) (nic.Provider, error) {
	return nil, ErrNotBuilt
}
