package exec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
)

// TestInitErrorIsPositioned: an init that fails at run time is one diagnostic at the failing
// sub-expression (as check would have reported it), not a message with a position inside it.
func TestInitErrorIsPositioned(t *testing.T) {
	at := diag.At("p.dag", 2, 26)
	g := &ir.Graph{Ranks: 1, Rank: make([]ir.RankSpan, 1), Buffers: []ir.Buffer{{
		Name: "a", Type: ir.U8, Count: 8, Pos: diag.At("p.dag", 2, 8),
		Init: func(rank int, dst []byte) error {
			return &ir.InitError{Pos: at, Msg: "division by zero in 1 / 0", Elem: 5, Rank: rank}
		},
	}}}
	err := NewMemory(g).ResetAll()
	var d *diag.Diagnostic
	require.ErrorAs(t, err, &d)
	assert.Equal(t, at, d.Pos)
	assert.Equal(t, "division by zero in 1 / 0 in the init of buffer a at element 5 on rank 0", d.Msg)
}
