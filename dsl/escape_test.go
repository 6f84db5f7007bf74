package dsl

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
)

// TestInvalidCharacterEscaped: the lexer's message about an escape character quotes it.
func TestInvalidCharacterEscaped(t *testing.T) {
	_, err := Parse("p.dag", []byte("plan p\nparam \x1b]0;pwned\x07 = 1\n"))
	require.Error(t, err)
	var out bytes.Buffer
	diag.Print(&out, err, diag.Sources{"p.dag": []byte("plan p\nparam \x1b]0;pwned\x07 = 1\n")})
	assert.NotContains(t, out.String(), "\x1b")
	assert.NotContains(t, out.String(), "\x07")
	assert.Contains(t, out.String(), `p.dag:2:7: invalid character '\x1b'`)
}
