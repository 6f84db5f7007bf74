package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
)

// TestDiagsGroupingNeverListsNoRank: one rank making the same mistake twice with different
// numbers (in a loop) once printed "(on rank 0; likewise on ranks )".
func TestDiagsGroupingNeverListsNoRank(t *testing.T) {
	pos := dsl.Pos{File: "t.dag", Line: 3, Col: 5}
	for _, tc := range []struct {
		name string
		add  func(d *diags)
		want string
	}{
		{"one rank, two numbers", func(d *diags) {
			d.add(pos, 0, "index %d is out of range", 10)
			d.add(pos, 0, "index %d is out of range", 11)
		}, "index 10 is out of range (on rank 0)"},
		{"the others add ranks", func(d *diags) {
			d.add(pos, 0, "index %d is out of range", 10)
			d.add(pos, 0, "index %d is out of range", 11)
			d.add(pos, 2, "index %d is out of range", 12)
		}, "index 10 is out of range (on rank 0; likewise on rank 2)"},
		{"every rank alike", func(d *diags) {
			for r := 0; r < 4; r++ {
				d.add(pos, r, "index %d is out of range", 10)
				d.add(pos, r, "index %d is out of range", 11)
			}
		}, "index 10 is out of range"},
		{"global first", func(d *diags) {
			d.add(pos, -1, "bad %d", 1)
			d.add(pos, 1, "bad %d", 2)
		}, "bad 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d diags
			tc.add(&d)
			l := d.list(4)
			require.Len(t, l, 1)
			assert.Equal(t, tc.want, l[0].Msg)
		})
	}
}
