package main

import (
	"fmt"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/planner"
)

// checkMemory refuses, before anything is allocated, a run that would not fit in the memory
// budget: the buffers of every rank on provider p (nil: not open yet) and the reference copy,
// the latency samples of --iters iterations, the timeline's records, and the timeline's trace
// text, which is built in memory before it is written.
func (c *runCmd) checkMemory(e *env, l *loaded, p nic.Provider) error {
	g := l.graph
	opts := exec.Options{Iters: c.Iters, Timeline: c.Timeline != ""}
	if p == nil { // verbs: one rank per process
		opts.Ranks = []int{0}
	}
	fp := exec.Estimate(g, p, opts)
	if err := fp.Check(l.budget); err != nil {
		return refuse(e, l, err)
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
			planner.Plural(len(c.Dump), "buffer"), budget.Format(need), budget.Format(dump), dumpElemBytes, budget.Format(fp.Total())),
			"dump smaller buffers"); err != nil {
			return refuse(e, l, err)
		}
	}
	if c.Timeline == "" {
		return nil
	}
	text := budget.Mul(int64(c.Iters), timelineTextBytes(g))
	need := budget.Add(fp.Total(), text)
	return refuse(e, l, l.budget.Check(need,
		fmt.Sprintf("--timeline of %d iterations needs %s: %s of trace text (%s events) besides %s for the run",
			c.Iters, budget.Format(need), budget.Format(text), eventCount(c.Iters, len(g.Ops)), budget.Format(fp.Total())),
		"use fewer --iters"))
}

// dumpElemBytes bounds what --dump holds per element and rank: the value boxed in an interface
// and its printed text.
const dumpElemBytes = 64

// eventCount is iters × ops as a number, or "more than 2^63" when that overflows.
func eventCount(iters, ops int) string {
	n := budget.Mul(int64(iters), int64(ops))
	if n == 1<<63-1 {
		return "more than 2^63"
	}
	return fmt.Sprint(n)
}

// timelineTextBytes bounds the trace-event text viz.Timeline writes per iteration: one event
// per op (its fixed fields, name and position) and one per rank for the iteration, doubled
// because the text is held in a growing buffer before it is written.
func timelineTextBytes(g *planner.Graph) int64 {
	const opEvent = 128  // {"name":"","ph":"i","s":"t","pid":R,"tid":T,"ts":T,"args":{"at":"","iteration":I,"op":"K"}},
	const iterEvent = 96 // {"name":"iteration I","ph":"X","pid":R,"tid":0,"ts":T,"dur":D},
	var n int64
	for i := range g.Ops {
		op := &g.Ops[i]
		n += opEvent + int64(len(op.Name)+len(op.Pos.String()))
	}
	n += int64(g.Ranks) * iterEvent
	return 2 * n
}
