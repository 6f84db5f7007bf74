package predict

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The lines LogGOPSim2's GOAL reader accepts, as WriteGOALTriggered writes them.
var (
	goalPut    = regexp.MustCompile(`^(\w+): (t?)(put|get) (\d+)b (to|from) (\d+)( when (\d+) reaches (\d+))?( ct (\d+))? tag (\d+)$`)
	goalAppend = regexp.MustCompile(`^(\w+): (t?)append (\d+)b to priority_list allowed (\d+)( when (\d+) reaches (\d+))?( ct (\d+))? use_once tag (\d+)$`)
	goalTest   = regexp.MustCompile(`^(\w+): test (\d+) for (\d+)$`)
	goalCalc   = regexp.MustCompile(`^(\w+): calc (\d+)$`)
	goalDep    = regexp.MustCompile(`^(\w+) i?requires (\w+)$`)
	goalCt     = regexp.MustCompile(`^// ct (\d+): \S+ \(\w+\)$`)
)

// Every plan of the library, compiled for a triggered target, is written in lines LogGOPSim2
// reads; every put and get has an entry appended at its target to match it, every counter named
// is one of the rank's, and every dependency names a label of its rank.
func TestGOALTriggeredPlans(t *testing.T) {
	files, err := filepath.Glob("../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		for _, target := range []string{"triggered", "triggered-sockets"} {
			p := compileFile(t, f, map[string]int64{"ranks": 4}, target)
			var b bytes.Buffer
			require.NoError(t, WriteGOALTriggered(&b, p, Default()), f)
			checkGOALTriggered(t, f+" "+target, b.String(), 4)
		}
	}
}

func checkGOALTriggered(t *testing.T, name, out string, ranks int) {
	t.Helper()
	lines := strings.Split(out, "\n")
	require.Equal(t, fmt.Sprintf("num_ranks %d", ranks), lines[1], name)
	sent := map[string]int{}    // "initiator>target tag" of puts and gets
	matched := map[string]int{} // "allowed>rank tag" of appended entries
	rank, counters := -1, 0
	labels := map[string]bool{}
	var deps [][2]string
	ct := func(s string) {
		if s == "" {
			return
		}
		c, _ := strconv.Atoi(s)
		assert.Less(t, c, counters, "%s rank %d: counter %d of %d", name, rank, c, counters)
	}
	for _, l := range lines[2:] {
		switch {
		case l == "":
		case strings.HasPrefix(l, "rank "):
			rank++
			assert.Equal(t, fmt.Sprintf("rank %d {", rank), l)
			counters = 0
			labels = map[string]bool{}
			deps = nil
		case l == "}":
			for _, d := range deps {
				assert.True(t, labels[d[0]] && labels[d[1]], "%s rank %d: %s requires %s", name, rank, d[0], d[1])
			}
		case goalCt.MatchString(l):
			counters++
		case goalPut.MatchString(l):
			m := goalPut.FindStringSubmatch(l)
			labels[m[1]] = true
			assert.Equal(t, m[2] == "t", m[7] != "", "%s: %s", name, l)
			ct(m[8])
			ct(m[11])
			sent[fmt.Sprintf("%d>%s %s", rank, m[6], m[12])]++ // a get too: the target's entry serves it
		case goalAppend.MatchString(l):
			m := goalAppend.FindStringSubmatch(l)
			labels[m[1]] = true
			assert.Equal(t, m[2] == "t", m[5] != "", "%s: %s", name, l)
			ct(m[6])
			ct(m[9])
			matched[fmt.Sprintf("%s>%d %s", m[4], rank, m[10])]++
		case goalTest.MatchString(l):
			m := goalTest.FindStringSubmatch(l)
			labels[m[1]] = true
			ct(m[2])
		case goalCalc.MatchString(l):
			labels[goalCalc.FindStringSubmatch(l)[1]] = true
		case goalDep.MatchString(l):
			m := goalDep.FindStringSubmatch(l)
			deps = append(deps, [2]string{m[1], m[2]})
		default:
			t.Errorf("%s: a line LogGOPSim2 does not read: %q", name, l)
		}
	}
	assert.Equal(t, ranks-1, rank, name)
	for k, n := range sent {
		assert.Equal(t, n, matched[k], "%s: %s: %d messages, %d entries to match them", name, k, n, matched[k])
	}
	assert.Equal(t, len(matched), len(sent), "%s: entries no message matches", name)
}

func TestGOALTriggeredCounters(t *testing.T) {
	p := compile(t, "one.dag", []byte(oneSend), nil, "triggered")
	var b bytes.Buffer
	require.NoError(t, WriteGOALTriggered(&b, p, Default()))
	out := b.String()
	// the send raises its queue's send counter, the receive its receive counter
	assert.Regexp(t, `(?m)^w\d+: put 100b to 1 ct \d+ tag \d+$`, out)
	assert.Regexp(t, `(?m)^w\d+: append 100b to priority_list allowed 0 ct \d+ use_once tag \d+$`, out)

	q := compileFile(t, "../plans/recursive_doubling_allreduce.dag", map[string]int64{"ranks": 4, "n": 4}, "triggered")
	b.Reset()
	require.NoError(t, WriteGOALTriggered(&b, q, Params{Host: 10, Reduce: 1}))
	out = b.String()
	assert.Regexp(t, `(?m)^w\d+: tput 32b to \d when \d+ reaches \d+ ct \d+ tag \d+$`, out) // the second step's send waits
	assert.Regexp(t, `(?m)^w\d+t: test \d+ for 2$`, out)                                    // a reduce waits for its send and receive
	assert.Regexp(t, `(?m)^w\d+: calc 42$`, out)                                            // 32 bytes at 1 ns/B + 10

	g := compileFile(t, "../plans/ring_allreduce.dag", map[string]int64{"ranks": 3}, "generic")
	assert.ErrorContains(t, WriteGOALTriggered(&b, g, Default()), "triggered target")
}

// A write that lands in a wait's region is matched by an entry that raises the region's
// remote-write counter; the write after the wait waits for that counter (`tput ... when C
// reaches 1`), and the wait's host step tests it before its calc.
func TestGOALTriggeredLandCounter(t *testing.T) {
	p := compileFile(t, "../testdata/onesided/counted_chain.dag", map[string]int64{"ranks": 3, "c": 2}, "triggered")
	var b bytes.Buffer
	require.NoError(t, WriteGOALTriggered(&b, p, Default()))
	out := b.String()
	checkGOALTriggered(t, "counted_chain", out, 3)
	rank1 := out[strings.Index(out, "rank 1 {"):strings.Index(out, "rank 2 {")]
	assert.Contains(t, rank1, "// ct 5: data[0:4].land (land)")
	assert.Regexp(t, `(?m)^m0: append 32b to priority_list allowed 0 ct 5 use_once tag \d+$`, rank1)
	assert.Regexp(t, `(?m)^m1: append 32b to priority_list allowed 0 ct 6 use_once tag \d+$`, rank1)
	assert.Regexp(t, `(?m)^w\d+: tput 32b to 2 when 5 reaches 1 ct \d+ tag \d+$`, rank1)
	assert.Regexp(t, `(?m)^(w\d+)l: test 5 for 1$`, rank1)
}
