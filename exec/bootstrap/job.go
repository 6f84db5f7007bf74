package bootstrap

import (
	"fmt"
	"strings"
)

// A Fact is one thing every rank of a job must agree on: the plan (a digest of its text), a
// parameter, the iteration count, the target, the engine. Key identifies it and Text says it for
// people, e.g. {Key: "param n", Text: "n=1024"} or {Key: "iters", Text: "--iters 3"}.
//
// The ranks compare their facts while they connect (Config.Job), so that ranks started with
// different plans or options are refused at once with the difference named ("rank 1 runs
// n=2048, rank 0 n=1024"), instead of failing later in the run with a length error or a hang.
type Fact struct {
	Key, Text string
}

// maxJob bounds the encoded facts of a job, which travel in the handshake.
const maxJob = maxHandshake - 64

// jobDiff names where rank r's facts differ from rank 0's, or returns "" when they agree.
func jobDiff(r int, theirs, ours []Fact) string {
	index := func(fs []Fact) map[string]string {
		m := make(map[string]string, len(fs))
		for _, f := range fs {
			m[f.Key] = f.Text
		}
		return m
	}
	t, o := index(theirs), index(ours)
	var d []string
	for _, f := range ours {
		switch tt, ok := t[f.Key]; {
		case !ok:
			d = append(d, fmt.Sprintf("rank 0 runs %s, rank %d has no %s", f.Text, r, f.Key))
		case tt != f.Text:
			d = append(d, fmt.Sprintf("rank %d runs %s, rank 0 %s", r, tt, f.Text))
		}
	}
	for _, f := range theirs {
		if _, ok := o[f.Key]; !ok {
			d = append(d, fmt.Sprintf("rank %d runs %s, rank 0 has no %s", r, f.Text, f.Key))
		}
	}
	return strings.Join(d, "; ")
}
