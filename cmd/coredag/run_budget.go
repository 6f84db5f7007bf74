package main

import (
	"fmt"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/internal/english"
)

// checkMemory refuses, before anything is allocated, a run that would not fit in the memory
// budget: the buffers of every rank on provider p (nil: not open yet) and the reference copy,
// the latency samples of --iters iterations and the timeline's records. The timeline's trace
// text is streamed to its file, not held: it costs disk, and a full disk leaves the old file.
func (c *runCmd) checkMemory(e *env, l *loaded, p nic.Provider) error {
	g := l.graph
	opts := exec.Options{Iters: c.Iters, Timeline: c.Timeline != ""}
	if p == nil { // a provider opened per process (runPerProcess): this process holds one rank
		opts.Ranks = []int{0}
	}
	fp := exec.Estimate(g, p, opts)
	if err := fp.Check(l.budget); err != nil {
		return refuse(e, l, err)
	}
	if c.Overlap {
		need := budget.Add(fp.Total(), exec.OverlapSampleBytes(c.Iters))
		if err := l.budget.Check(need, fmt.Sprintf("--overlap needs %s: %s for its phases' samples besides %s for the run",
			budget.Format(need), budget.Format(exec.OverlapSampleBytes(c.Iters)), budget.Format(fp.Total())), "use fewer --iters"); err != nil {
			return refuse(e, l, err)
		}
	}
	if len(c.Dump) > 0 {
		var elems int64
		for _, name := range c.Dump {
			if b, ok := exec.BufferByName(g, name); ok {
				elems = budget.Add(elems, g.Buffers[b].Count)
			}
		}
		dump := budget.Mul(budget.Mul(elems, int64(g.Ranks)), dumpElemBytes)
		need := budget.Add(fp.Total(), dump)
		if err := l.budget.Check(need, fmt.Sprintf("--dump of %s needs %s: %s for the printed values (%d bytes per element and rank) besides %s for the run",
			english.Plural(len(c.Dump), "buffer"), budget.Format(need), budget.Format(dump), dumpElemBytes, budget.Format(fp.Total())),
			"dump smaller buffers"); err != nil {
			return refuse(e, l, err)
		}
	}
	return nil
}

// dumpElemBytes bounds what --dump holds per element and rank: the value boxed in an interface
// and its printed text.
const dumpElemBytes = 64
