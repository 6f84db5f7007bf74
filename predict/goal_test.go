package predict

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGOALRing(t *testing.T) {
	p := compileFile(t, "../plans/ring_allreduce.dag", map[string]int64{"ranks": 3, "n": 4}, "generic")
	var b bytes.Buffer
	require.NoError(t, WriteGOAL(&b, p.Graph, Params{Reduce: 1, Host: 10}))
	out := b.String()
	assert.Contains(t, out, "num_ranks 3\n")
	assert.Equal(t, 3, strings.Count(out, "\nrank "))
	// every send has a receive with the same bytes, peer and tag on the other side
	sends := regexp.MustCompile(`(?m)^o\d+: send (\d+)b to (\d+) tag (\d+)$`).FindAllStringSubmatch(out, -1)
	recvs := regexp.MustCompile(`(?m)^o\d+: recv (\d+)b from (\d+) tag (\d+)$`).FindAllStringSubmatch(out, -1)
	require.NotEmpty(t, sends)
	require.Equal(t, len(sends), len(recvs))
	count := func(ms [][]string) map[string]int {
		c := map[string]int{}
		for _, m := range ms {
			c[m[1]+"/"+m[3]]++
		}
		return c
	}
	assert.Equal(t, count(sends), count(recvs))
	assert.Contains(t, out, "send 16b to 1 tag")       // a chunk of 4 f32
	assert.Regexp(t, `(?m)^o\d+: calc 26$`, out)       // reduce of 16 bytes at 1 ns/B + 10
	assert.Regexp(t, `(?m)^o\d+ requires o\d+$`, out)  // after edges
	assert.Regexp(t, `(?m)^o\d+ irequires o\d+$`, out) // queue order
	for _, line := range strings.Split(out, "\n") {
		if m := regexp.MustCompile(`^(\S+) i?requires (\S+)$`).FindStringSubmatch(line); m != nil {
			assert.Contains(t, out, "\n"+m[2]+": ", "a dependency on an op that exists: %s", line)
		}
	}
}

func TestGOALOneSided(t *testing.T) {
	p := compileFile(t, "../plans/read_gather.dag", map[string]int64{"ranks": 3}, "generic")
	var b bytes.Buffer
	require.NoError(t, WriteGOAL(&b, p.Graph, Default()))
	out := b.String()
	// a read is a request and an answer
	assert.Regexp(t, `(?m)^o\d+r: send 0b to \d+ tag \d+$`, out)
	assert.Regexp(t, `(?m)^a\d+: send 256b to 0 tag \d+$`, out)
	assert.Regexp(t, `(?m)^a(\d+) requires q(\d+)$`, out)
}
