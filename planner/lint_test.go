package planner

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/verify"
)

// The lints run beside the checks give what verify.RNR gives on its own; a plan that fails
// gets none.
func TestLoadLint(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"ring_allreduce", "pipeline_chain", "pairwise_alltoall"} {
		src, err := os.ReadFile("../plans/" + name + ".dag")
		require.NoError(t, err)
		var got diag.List
		called := false
		g, err := Load(t.Context(), name+".dag", src, map[string]int64{"ranks": 6}, Options{Lint: func(l diag.List) { got, called = l, true }})
		require.NoError(t, err)
		require.True(t, called, name)
		assert.Equal(t, verify.RNR(t.Context(), g), got, name)
	}
	called := false
	_, err := Load(t.Context(), "racy.dag", []byte(`plan p
buffer a i32[8]
op x = copy a[0:4] to a[4:8]
op y = copy a[4:8] to a[0:4]
`), nil, Options{Lint: func(diag.List) { called = true }})

	require.Error(t, err)
	assert.False(t, called, "a racy plan is not linted")
}

// Beside runs on the Graph of a plan free of deadlocks, whether or not a later check fails, and
// is done when Load returns; a plan with a cycle never reaches it.
func TestLoadBeside(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, src string
		ran       bool
	}{
		{"ok", "plan p\nbuffer a i32[8]\nop x = copy a[0:4] to a[4:8]\n", true},
		{"racy", "plan p\nbuffer a i32[8]\nop x = copy a[0:4] to a[4:8]\nop y = copy a[4:8] to a[0:4]\n", true},
		{"cycle", "plan p\nop x = nop after y\nop y = nop after x\n", false},
	} {
		var seen *ir.Graph
		ran := make(chan struct{}, 1)
		g, err := Load(t.Context(), c.name+".dag", []byte(c.src), nil, Options{Beside: func(ctx context.Context, g *ir.Graph) {
			time.Sleep(10 * time.Millisecond)
			seen = g
			ran <- struct{}{}
		}})

		assert.Equal(t, c.name == "ok", err == nil, "%s: %v", c.name, err)
		select {
		case <-ran:
			assert.True(t, c.ran, "%s: Beside ran", c.name)
			assert.Same(t, g, seen, c.name)
		default:
			assert.False(t, c.ran, "%s: Beside had not run (or finished) when Load returned", c.name)
		}
	}
}

// Beside's context is cancelled when a later check fails, so that its work can stop, and only
// then.
func TestLoadBesideCancelled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, src string }{
		{"ok", "plan p\nbuffer a i32[8]\nop x = copy a[0:4] to a[4:8]\n"},
		{"racy", "plan p\nbuffer a i32[8]\nop x = copy a[0:4] to a[4:8]\nop y = copy a[4:8] to a[0:4]\n"},
	} {
		// A failing check cancels at once; a plan that passes is long checked after 200 ms.
		wait := map[string]time.Duration{"ok": 200 * time.Millisecond, "racy": time.Minute}
		var cancelled bool
		_, err := Load(t.Context(), c.name+".dag", []byte(c.src), nil, Options{Beside: func(ctx context.Context, g *ir.Graph) {
			select {
			case <-ctx.Done():
				cancelled = true
			case <-time.After(wait[c.name]):
			}
		}})

		assert.Equal(t, c.name == "racy", err != nil, "%s: %v", c.name, err)
		assert.Equal(t, c.name == "racy", cancelled, "%s: cancelled", c.name)
	}
}
