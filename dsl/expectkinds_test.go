package dsl

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coredag/coredag/ir"
)

// The collectives the syntax errors list are those elaboration knows.
func TestExpectKindsAsIR(t *testing.T) {
	assert.Equal(t, ir.ExpectKinds(), expectKinds)
}
