package verify

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
)

// The two ways an RC queue publishes data (issue 30): a write, then a notified write or a send
// on the same queue; the receiver reads the first write's data once the second has arrived.
const (
	publishNotify = `plan p
param ranks = 2
param n = 4
buffer data f32[2 * n] init rank
buffer inbox f32[2 * n] remote_write
buffer out f32[2 * n]
queue q to (rank + 1) % ranks peer q
op w   = write q data[0 : n] to inbox[0 : n]
op wn  = write q data[n : 2 * n] to inbox[n : 2 * n] notify
op got = recv q
op use = copy inbox to out after got
`
	publishSend = `plan p
param ranks = 2
param n = 4
buffer data f32[2 * n] init rank
buffer inbox f32[n] remote_write
buffer flag f32[n]
buffer out f32[n]
queue q to (rank + 1) % ranks peer q
op w   = write q data[0 : n] to inbox
op s   = send q data[n : 2 * n]
op got = recv q flag
op use = copy inbox to out after got
`
	// A read, then a send that tells the peer it may overwrite what was read: RC does not order
	// a send after a read (a lost read response is re-executed), so this races on RC.
	readThenSend = `plan p
param ranks = 2
param n = 4
buffer src f32[n] remote_read init rank
buffer dst f32[n]
buffer tok f32[1]
buffer flag f32[1]
buffer fresh f32[n] init 7
queue q to (rank + 1) % ranks peer q
op r   = read q src to dst
op s   = send q tok
op got = recv q flag
op over = copy fresh to src after got
`
)

func targetOptions(t *testing.T, name string) Options {
	t.Helper()
	tg, err := ir.LookupTarget(name)
	require.NoError(t, err)
	return Options{Order: tg.Order, Target: tg.Name}
}

func TestOrderedPatterns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, src string
		relies    string   // the ordering relied on
		clean     []string // targets it checks clean on
		racy      []string // and those it races on
	}{
		{"write then notified write", publishNotify, "write-after-write ordering (FI_ORDER_WAW)",
			[]string{"connectx", "connectx-inline", "generic", "triggered", "triggered-cxi", "triggered-sockets"}, []string{"unordered"}},
		{"write then send", publishSend, "send-after-write ordering (FI_ORDER_SAW)",
			[]string{"connectx", "connectx-inline", "generic", "triggered", "triggered-sockets"}, []string{"unordered", "triggered-cxi"}},
		{"read then send", readThenSend, "send-after-read ordering (FI_ORDER_SAR)",
			[]string{"triggered-sockets"}, []string{"connectx", "connectx-inline", "generic", "triggered", "triggered-cxi", "unordered"}},
	} {
		g := graphOf(t, c.src)
		// Without an ordering (the zero Options), as before: a race, and no word of ordering.
		errs := Options{}.Check(t.Context(), g)
		require.Len(t, errs, 1, c.name)
		assert.NotContains(t, errs[0].Msg, "FI_ORDER", c.name)
		for _, name := range c.clean {
			errs, o := targetOptions(t, name).CheckOrder(t.Context(), g)
			require.Empty(t, errs, "%s on %s", c.name, name)
			// Its order of events agrees with the ordering: the first landing comes first.
			first, second := g.Rank[1].FirstOp, g.Rank[1].FirstOp+1
			assert.Less(t, o.Land(first), o.Land(second), "%s on %s", c.name, name)
			d := o.Reliance(t.Context())
			require.NotNil(t, d, "%s on %s", c.name, name)
			assert.Contains(t, d.Msg, "relies on "+c.relies, "%s on %s", c.name, name)
			for _, lack := range c.racy {
				assert.Contains(t, d.Msg, "`"+lack+"`", "%s on %s", c.name, name)
			}
			for _, give := range c.clean {
				assert.NotContains(t, d.Msg, "`"+give+"`", "%s on %s", c.name, name)
			}
		}
		for _, name := range c.racy {
			errs := targetOptions(t, name).Check(t.Context(), g)
			require.Len(t, errs, 1, "%s on %s", c.name, name)
			assert.Contains(t, errs[0].Msg, "only "+c.relies, "%s on %s", c.name, name)
			assert.Contains(t, errs[0].Msg, "which target `"+name+"` does not give", "%s on %s", c.name, name)
		}
	}
}

// A plan race-free without ordering relies on none, whatever the target.
func TestNoReliance(t *testing.T) {
	t.Parallel()
	g := ringGraph(t, 5)
	errs, o := targetOptions(t, "connectx").CheckOrder(t.Context(), g)
	require.Empty(t, errs)
	assert.Nil(t, o.Reliance(t.Context()))
	assert.Nil(t, o.Ordered())
}

// The ordering orders consecutive ops only: a read between a write and a send on RC breaks the
// chain (RC does not order a send after a read), and the check says so rather than assuming the
// write and the send are ordered.
func TestOrderConsecutive(t *testing.T) {
	t.Parallel()
	g := graphOf(t, `plan p
param ranks = 2
param n = 4
buffer data f32[2 * n] init rank
buffer inbox f32[n] remote_write
buffer back f32[1] remote_read
buffer got1 f32[1]
buffer flag f32[n]
buffer out f32[n]
queue q to (rank + 1) % ranks peer q
op w   = write q data[0 : n] to inbox
op rd  = read q back to got1
op s   = send q data[n : 2 * n]
op got = recv q flag
op use = copy inbox to out after got
`)
	errs := targetOptions(t, "connectx").Check(t.Context(), g)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Msg, "race on rank 0's inbox")
	assert.Empty(t, targetOptions(t, "triggered-sockets").Check(t.Context(), g))
}
