package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHelp: "coredag help [COMMAND]" works as in go and git, and no arguments list every command.
func TestHelp(t *testing.T) {
	t.Parallel()
	code, out, _ := coredag(t, "", "help")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "Commands:")

	code, out, _ = coredag(t, "", "help", "run")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "Usage: coredag run <file>")

	code, out, _ = coredag(t, "", "help", "export", "msccl")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "Usage: coredag export msccl <file>")

	code, _, stderr := coredag(t, "", "help", "nosuch")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `coredag help nosuch: unknown command`)

	// No arguments: the whole list on stderr (every command, not a cut-off "expected one of"), exit 2.
	code, out, stderr = coredag(t, "")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	for _, c := range commands {
		assert.Contains(t, stderr, c.name)
	}
	assert.Contains(t, stderr, "targets")
}
