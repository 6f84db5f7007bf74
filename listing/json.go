package listing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/coredag/coredag/ir"
)

// The JSON listing. Its shape is documented in docs/compile-json.md and kept stable: fields are
// only ever added.

type jsonPlan struct {
	Version int          `json:"version"`
	Plan    string       `json:"plan"`
	File    string       `json:"file"`
	Params  []jsonParam  `json:"params"`
	Buffers []jsonBuffer `json:"buffers"`
	Target  jsonTarget   `json:"target"`
	Ranks   []jsonRank   `json:"ranks"`
	Stats   jsonStats    `json:"stats"`
	// CounterLimit, on triggered targets, is the counter that overflows first; absent when none
	// grows.
	CounterLimit *jsonCounterLimit `json:"counter_limit,omitempty"`
	// WordLimit is the watched word that wraps first when nothing resets the memory between
	// iterations (a library's starts); absent when no watched word grows.
	WordLimit *jsonWordLimit `json:"word_limit,omitempty"`
}

type jsonWordLimit struct {
	Rank         int         `json:"rank"`
	Word         string      `json:"word"`
	Wait         string      `json:"wait"`
	Start        json.Number `json:"start"`
	PerIteration uint64      `json:"per_iteration"`
	Iterations   uint64      `json:"iterations"`
}

type jsonParam struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

type jsonBuffer struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Count  int64    `json:"count"`
	Bytes  int64    `json:"bytes"`
	Access []string `json:"access"`
	Extern bool     `json:"extern"`
}

type jsonTarget struct {
	Name         string `json:"name"`
	Style        string `json:"style"`
	CrossChannel bool   `json:"cross_channel"`
	PrePost      bool   `json:"pre_post"`
	MaxWQDepth   int    `json:"max_wq_depth"`
	MaxCQDepth   int    `json:"max_cq_depth"`
	MaxInline    int    `json:"max_inline"`
	MaxSGE       int    `json:"max_sge"`
	CanCalc      bool   `json:"can_calc"`
	// Trigger is the profile of a triggered target.
	Trigger *TriggerProfileJSON `json:"trigger,omitempty"`
}

// TriggerProfileJSON is a target's ir.TriggerProfile in JSON (docs/compile-json.md), as
// `coredag compile --format json` and `coredag targets --json` print it.
type TriggerProfileJSON struct {
	Provider          string   `json:"provider"`
	MaxOutstanding    int      `json:"max_outstanding"`
	CounterWorkCost   int      `json:"counter_work_cost"`
	MaxCounters       int      `json:"max_counters"`
	MaxCounter        uint64   `json:"max_counter"`
	RecvThresholdZero bool     `json:"recv_threshold_zero"`
	Guesses           []string `json:"guesses"`
	Source            string   `json:"source"`
}

// NewTriggerProfileJSON is the JSON form of p (nil for nil).
func NewTriggerProfileJSON(p *ir.TriggerProfile) *TriggerProfileJSON {
	if p == nil {
		return nil
	}
	return &TriggerProfileJSON{Provider: p.Provider, MaxOutstanding: p.MaxOutstanding, CounterWorkCost: p.WorkCost(),
		MaxCounters: p.MaxCounters, MaxCounter: p.MaxCounter, RecvThresholdZero: p.RecvThresholdZero,
		Guesses: p.Guesses.Names(), Source: p.Source}
}

type jsonRank struct {
	Rank    int          `json:"rank"`
	Queues  []jsonQueue  `json:"queues"`
	CQs     []jsonCQ     `json:"cqs"`
	Trigger *jsonTrigger `json:"trigger,omitempty"`
}

// jsonTrigger is a rank's triggered form: counters, triggered work, and its cost.
type jsonTrigger struct {
	Counters []jsonCounter   `json:"counters"`
	Work     []jsonTrigEntry `json:"work"`
	Summary  jsonTrigSummary `json:"summary"`
}

type jsonCounter struct {
	Index        int     `json:"index"`
	Name         string  `json:"name"`
	Kind         string  `json:"kind"`
	Queue        string  `json:"queue,omitempty"`
	Op           string  `json:"op,omitempty"`
	Region       string  `json:"region,omitempty"`
	PerIteration uint64  `json:"per_iteration"`
	Iterations   *uint64 `json:"iterations,omitempty"`
}

type jsonTrigEntry struct {
	Index     int          `json:"index"`
	Kind      string       `json:"kind"`
	Op        string       `json:"op"`
	Pos       string       `json:"pos"`
	Counter   string       `json:"counter,omitempty"`
	Threshold *uint64      `json:"threshold,omitempty"`
	Cause     string       `json:"cause,omitempty"`
	Units     int          `json:"units"`
	WQE       *jsonTrigWQE `json:"wqe,omitempty"`
	Target    string       `json:"target,omitempty"`
	Value     *uint64      `json:"value,omitempty"`
	CPUWait   *jsonCPUWait `json:"cpu_wait,omitempty"`
}

// jsonCPUWait is the counter and count the CPU waits for before it runs a HOST step.
type jsonCPUWait struct {
	Counter   string `json:"counter"`
	Threshold uint64 `json:"threshold"`
}

type jsonTrigWQE struct {
	Queue  string `json:"queue"`
	Index  int    `json:"index"`
	Opcode string `json:"opcode"`
}

type jsonTrigSummary struct {
	Counters     int               `json:"counters"`
	Outstanding  int               `json:"outstanding"`
	Units        int               `json:"units"`
	CounterLimit *jsonCounterLimit `json:"counter_limit,omitempty"`
}

type jsonCounterLimit struct {
	Rank         int    `json:"rank"`
	Counter      string `json:"counter"`
	PerIteration uint64 `json:"per_iteration"`
	MaxCounter   uint64 `json:"max_counter"`
	Iterations   uint64 `json:"iterations"`
}

func counterLimitJSON(l ir.CounterLimit) *jsonCounterLimit {
	if l.Iterations == ir.NoIterationLimit {
		return nil
	}
	return &jsonCounterLimit{Rank: l.Rank, Counter: l.Name, PerIteration: l.PerIteration, MaxCounter: l.Max, Iterations: l.Iterations}
}

// trigJSON is the JSON form of rank plan rp's triggered work.
func trigJSON(p *ir.Plan, rp *ir.RankPlan) *jsonTrigger {
	g, tr, prof := p.Graph, rp.Trig, p.Target.Trigger
	out := &jsonTrigger{Counters: []jsonCounter{}, Work: []jsonTrigEntry{}}
	for i := range tr.Counters {
		c := &tr.Counters[i]
		jc := jsonCounter{Index: i, Name: c.Name, Kind: c.Kind.String(), PerIteration: c.PerIteration}
		if c.Queue >= 0 {
			jc.Queue = rp.Queues[c.Queue].Name
		}
		if c.Op != ir.None {
			jc.Op = g.Ops[c.Op].Name
		}
		if c.Kind == ir.CntLand {
			jc.Region = g.SliceString(c.Region)
		}
		if n := tr.Iterations(i, prof.MaxCounter); n != ir.NoIterationLimit {
			jc.Iterations = &n
		}
		out.Counters = append(out.Counters, jc)
	}
	for k := range tr.Work {
		w := &tr.Work[k]
		je := jsonTrigEntry{Index: k, Kind: w.Kind.String(), Op: w.Name, Pos: w.Pos.String(), Units: prof.Units(rp, w)}
		if w.Counter != ir.Untriggered {
			thr := w.Threshold
			je.Counter, je.Threshold = tr.Counters[w.Counter].Name, &thr
		}
		if w.Cause != ir.None {
			je.Cause = g.Ops[w.Cause].Name
		}
		if w.Kind == ir.TrigOp {
			e := &rp.Queues[w.Loc.Queue].Chain[w.Loc.Index]
			je.WQE = &jsonTrigWQE{Queue: rp.Queues[w.Loc.Queue].Name, Index: w.Loc.Index, Opcode: e.Opcode.String()}
			if k, n, ok := tr.HostWait(g, w.Op); ok && w.Loc.Queue == rp.Host {
				je.CPUWait = &jsonCPUWait{Counter: tr.Counters[k].Name, Threshold: n}
			}
		} else {
			v := w.Value
			je.Target, je.Value = tr.Counters[w.Target].Name, &v
		}
		out.Work = append(out.Work, je)
	}
	l := prof.Load(rp)
	out.Summary = jsonTrigSummary{Counters: l.Counters, Outstanding: l.Entries, Units: l.Units, CounterLimit: counterLimitJSON(p.RankCounterLimit(rp.Rank))}
	return out
}

type jsonQueue struct {
	Name         string    `json:"name"`
	Kind         string    `json:"kind"`
	Queue        string    `json:"queue,omitempty"`
	CQ           string    `json:"cq,omitempty"`
	Managed      bool      `json:"managed"`
	Depth        int       `json:"depth"`
	PerIteration uint32    `json:"per_iteration"`
	WQEs         []jsonWQE `json:"wqes"`
}

type jsonCQ struct {
	Name         string `json:"name"`
	Queue        string `json:"queue"`
	Depth        int    `json:"depth"`
	PerIteration uint32 `json:"per_iteration"`
}

type jsonSlice struct {
	Buffer string `json:"buffer"`
	Offset int64  `json:"offset"`
	Count  int64  `json:"count"`
	Bytes  int64  `json:"bytes"`
}

type jsonCond struct {
	CQ    string `json:"cq"`
	Count uint32 `json:"count"`
	Op    string `json:"op"`
}

type jsonEnable struct {
	Queue string `json:"queue"`
	UpTo  uint32 `json:"upto"`
}

type jsonWQE struct {
	Index  int         `json:"index"`
	Opcode string      `json:"opcode"`
	Op     string      `json:"op"`
	Pos    string      `json:"pos"`
	Flags  []string    `json:"flags"`
	Peer   *int        `json:"peer,omitempty"`
	Local  *jsonSlice  `json:"local,omitempty"`
	More   []jsonSlice `json:"more,omitempty"`
	Remote *jsonSlice  `json:"remote,omitempty"`
	Source *jsonSlice  `json:"source,omitempty"`
	Add    *int64      `json:"add,omitempty"`
	Cmp    *int64      `json:"compare,omitempty"`
	Swap   *int64      `json:"swap,omitempty"`
	Reduce string      `json:"reduce,omitempty"`
	Wait   *jsonCond   `json:"wait,omitempty"`
	Enable *jsonEnable `json:"enable,omitempty"`
	Waits  []jsonCond  `json:"waits,omitempty"`
}

type jsonStats struct {
	WQEs         int `json:"wqes"`
	DataWQEs     int `json:"data_wqes"`
	HostSteps    int `json:"host_steps"`
	NaiveWaits   int `json:"naive_waits"`
	Waits        int `json:"waits"`
	NaiveEnables int `json:"naive_enables"`
	Enables      int `json:"enables"`
	HostWaits    int `json:"host_waits"`
	Fences       int `json:"fences"`
	Signalled    int `json:"signalled"`
	CriticalPath int `json:"critical_path"`
}

// WriteJSON writes the Plan as JSON (docs/compile-json.md). Every WQE object has an "opcode"
// field holding one of the Opcode names. Like Write, it streams: the document is encoded one rank
// at a time into a buffered writer over w.
func WriteJSON(w io.Writer, p *ir.Plan, opt Options) error {
	return NewJSONWriter(w, opt).writeAll(p)
}

// jsonDoc is the JSON document of p without its ranks, and where they go in it: just before
// the closing bracket of its empty "ranks" list. Each rank is encoded on its own.
func jsonDoc(p *ir.Plan) (doc []byte, at int, err error) {
	g := p.Graph
	t := p.Target
	out := jsonPlan{Version: 1, Plan: g.Name, File: g.File, Params: []jsonParam{}, Ranks: []jsonRank{},
		Target: jsonTarget{Name: t.Name, Style: t.Style.String(), CrossChannel: t.CrossChannel, PrePost: t.PrePost,
			MaxWQDepth: t.MaxWQDepth, MaxCQDepth: t.MaxCQDepth, MaxInline: t.MaxInline, MaxSGE: t.MaxSGE, CanCalc: t.CanCalc,
			Trigger: NewTriggerProfileJSON(t.Trigger)},
		Stats: jsonStats(p.Stats)}
	if lim, ok := p.CounterLimit(); ok {
		out.CounterLimit = counterLimitJSON(lim)
	}
	if lim := g.WordLimit(); lim.Iterations != ir.NoIterationLimit {
		t := g.Buffers[lim.Word.Buf].Type
		out.WordLimit = &jsonWordLimit{Rank: lim.Rank, Word: g.SliceString(lim.Word), Wait: g.Ops[lim.Wait].Name,
			Start: json.Number(ir.WordString(t, lim.Start)), PerIteration: lim.PerIteration, Iterations: lim.Iterations}
	}
	for _, prm := range g.Params {
		out.Params = append(out.Params, jsonParam{prm.Name, prm.Value})
	}
	out.Buffers = make([]jsonBuffer, len(g.Buffers))
	for i := range g.Buffers {
		b := &g.Buffers[i]
		out.Buffers[i] = jsonBuffer{Name: b.Name, Type: b.Type.String(), Count: b.Count, Bytes: b.Bytes(),
			Access: strings.Fields(b.Access.String()), Extern: b.Extern}
	}
	if doc, err = json.MarshalIndent(out, "", "  "); err != nil {
		return nil, 0, err
	}
	mark := []byte("\n  \"ranks\": []")
	if at = bytes.Index(doc, mark); at < 0 {
		return nil, 0, fmt.Errorf("listing: no ranks in the JSON document")
	}
	return doc, at + len(mark) - 1, nil
}

// rankJSON is the JSON form of rank r's plan.
func rankJSON(p *ir.Plan, r int) jsonRank {
	g := p.Graph
	slice := func(s ir.Slice) *jsonSlice {
		if !s.Valid() {
			return nil
		}
		return &jsonSlice{Buffer: g.Buffers[s.Buf].Name, Offset: s.Off, Count: s.Len, Bytes: g.Bytes(s)}
	}
	rp := &p.Ranks[r]
	jr := jsonRank{Rank: r, Queues: []jsonQueue{}, CQs: []jsonCQ{}}
	cqName := func(i int) string {
		if i < 0 || i >= len(rp.CQs) {
			return ""
		}
		return rp.CQs[i].Name
	}
	cond := func(c ir.Cond) jsonCond {
		return jsonCond{CQ: cqName(int(c.CQ)), Count: c.Count, Op: g.Ops[c.Op].Name}
	}
	for wi := range rp.Queues {
		q := &rp.Queues[wi]
		jq := jsonQueue{Name: q.Name, Kind: q.Kind.String(), CQ: cqName(q.CQ), Managed: q.Managed, Depth: q.Depth,
			PerIteration: q.PerIteration, WQEs: []jsonWQE{}}
		if q.Queue != ir.None {
			jq.Queue = g.Queues[q.Queue].Name
		}
		for k := range q.Chain {
			e := &q.Chain[k]
			op := p.OpOf(e)
			je := jsonWQE{Index: k, Opcode: e.Opcode.String(), Op: op.Name, Pos: op.Pos.String(), Flags: []string{},
				Local: slice(e.Local.Slice()), Remote: slice(e.Remote.Slice())}
			for _, m := range p.More(e) {
				je.More = append(je.More, *slice(m))
			}
			for _, f := range []struct {
				bit  ir.Flags
				name string
			}{{ir.Signalled, "signalled"}, {ir.Fence, "fence"}, {ir.Inline, "inline"}} {
				if e.Flags&f.bit != 0 {
					je.Flags = append(je.Flags, f.name)
				}
			}
			if e.Opcode.IsData() {
				peer := int(e.Peer)
				je.Peer = &peer
			}
			switch e.Opcode {
			case ir.OpcAtomicFAdd:
				a := op.A()
				je.Add = &a
			case ir.OpcAtomicCAS:
				a, b := op.A(), op.B()
				je.Cmp, je.Swap = &a, &b
			case ir.OpcWait:
				c := cond(e.Wait)
				je.Wait = &c
			case ir.OpcSendEnable, ir.OpcRecvEnable:
				je.Enable = &jsonEnable{Queue: rp.Queues[e.Queue].Name, UpTo: e.UpTo}
			case ir.OpcHost:
				if g.Ops[e.Op].Kind == ir.OpReduce {
					je.Reduce = e.Red.String()
				}
				je.Local, je.Source = slice(g.Ops[e.Op].Dst), slice(g.Ops[e.Op].Src)
				for _, c := range e.Waits {
					je.Waits = append(je.Waits, cond(c))
				}
			}
			jq.WQEs = append(jq.WQEs, je)
		}
		jr.Queues = append(jr.Queues, jq)
	}
	for ci := range rp.CQs {
		cq := &rp.CQs[ci]
		jr.CQs = append(jr.CQs, jsonCQ{Name: cq.Name, Queue: rp.Queues[cq.Queue].Name, Depth: cq.Depth, PerIteration: cq.PerIteration})
	}
	if rp.Trig != nil {
		jr.Trigger = trigJSON(p, rp)
	}
	return jr
}
