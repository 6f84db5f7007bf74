package provider

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/ofi"
	"github.com/coredag/coredag/exec/verbs"
)

func TestLookup(t *testing.T) {
	assert.Equal(t, []string{"softnic", "ofi", "verbs"}, Names())
	e, err := Lookup("")
	require.NoError(t, err)
	assert.Equal(t, "softnic", e.Name, "the default")
	_, err = Lookup("rxe")
	require.Error(t, err)
	assert.Equal(t, `unknown provider "rxe" (use softnic, ofi, verbs)`, err.Error())
}

// TestUsable: a provider this build lacks says how to get it.
func TestUsable(t *testing.T) {
	for name, built := range map[string]struct {
		ok  bool
		err error
	}{"ofi": {ofi.Available, ofi.ErrNotBuilt}, "verbs": {verbs.Available, verbs.ErrNotBuilt}} {
		_, err := Usable(name)
		if built.ok {
			assert.NoError(t, err, name)
		} else {
			assert.True(t, errors.Is(err, built.err), "%s: %v", name, err)
		}
	}
}

// TestSoftnic: the software NIC opens seeded or not, runs every rank here, and closes.
func TestSoftnic(t *testing.T) {
	e, err := Usable("softnic")
	require.NoError(t, err)
	assert.True(t, e.AllRanks && e.Seeded && !e.PerProcess)
	p, err := e.Open(Config{Rank: -1, Seeded: true, Seed: 7})
	require.NoError(t, err)
	assert.Equal(t, "softnic", p.Name())
	assert.Equal(t, e.Caps(Config{}), p.Caps(), "the assumed caps are the NIC's")
	for r := 0; r < 3; r++ {
		c, err := p.Open(r)
		require.NoError(t, err)
		require.NoError(t, c.Close())
	}
	require.NoError(t, p.Close())
}
