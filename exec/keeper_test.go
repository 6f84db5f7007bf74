package exec

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/coredag/coredag/exec/nic"
)

// TestLingerSaturates: a hang timeout at the end of Duration's range (an exec caller's "no
// timeout") lingers, rather than overflowing into a deadline in the past.
func TestLingerSaturates(t *testing.T) {
	k := &keeper{hp: []nic.HostProgress{&driveCount{}}, base: time.Now().Add(-time.Second)}
	k.linger(time.Duration(math.MaxInt64))
	assert.True(t, k.lingering())
	k.settle()
	assert.False(t, k.lingering())
}
