package dsl

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClosest(t *testing.T) {
	for _, tc := range []struct {
		word  string
		known []string
		want  string
	}{
		{"parm", []string{"plan", "param", "let"}, "param"},
		{"date", []string{"data", "tmp"}, "data"},
		{"qq", []string{"q", "right"}, "q"},
		{"b", []string{"a"}, ""},                            // one letter: no guess
		{"xyz", []string{"data"}, ""},                       // too far
		{"recieve", []string{"receive", "recv"}, "receive"}, // two edits for a long word
		{"dat", []string{"dab", "dac"}, "dab"},              // ties: alphabetical
		{"data", []string{"data"}, ""},                      // the word itself is no suggestion
	} {
		assert.Equal(t, tc.want, Closest(tc.word, tc.known), tc.word)
	}
}
