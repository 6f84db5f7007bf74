package viz

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/coredag/coredag/ir"
)

// Timeline writes what a run recorded with exec.Options.Timeline as trace-event JSON, the format
// Perfetto (ui.perfetto.dev) and chrome://tracing open. Each rank is a process; its tracks are
// its iterations, its host ops, and the send and receive side of each of its queues. Every op
// completion is an instant event named after the op, with its kind, source position and
// iteration; the iterations are laid end to end. iters holds the iterations' durations
// (exec.Result.Latency.All) and at the completion times by iteration and op (exec.Result.Timeline;
// negative for ops that did not complete in this process).
func Timeline(w io.Writer, g *ir.Graph, iters []time.Duration, at [][]time.Duration) error {
	if len(at) != len(iters) {
		return fmt.Errorf("timeline: %d iterations timed but %d recorded", len(iters), len(at))
	}
	for i, a := range at {
		if len(a) != len(g.Ops) {
			return fmt.Errorf("timeline: iteration %d records %d ops, plan %s has %d", i, len(a), g.Name, len(g.Ops))
		}
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(`{"displayTimeUnit":"ns","traceEvents":[`)
	sep := "\n"
	emit := func(ev traceEvent) {
		b, _ := json.Marshal(ev) // plain fields: cannot fail
		bw.WriteString(sep)
		bw.Write(b)
		sep = ",\n"
	}
	// Name the tracks of the ranks that ran here.
	local := make([]bool, g.Ranks)
	for _, a := range at {
		for id, t := range a {
			local[g.Ops[id].Rank] = local[g.Ops[id].Rank] || t >= 0
		}
	}
	for r := 0; r < g.Ranks; r++ {
		if !local[r] {
			continue
		}
		emit(meta("process_name", r, 0, fmt.Sprintf("rank %d", r)))
		emit(meta("thread_name", r, 0, "iterations"))
		emit(meta("thread_name", r, 1, "host ops"))
		for qi := range g.Queues {
			if q := &g.Queues[qi]; q.Rank == r {
				emit(meta("thread_name", r, sideTrack(ir.QueueID(qi), false), fmt.Sprintf("%s send (to rank %d)", q.Name, q.PeerRank)))
				emit(meta("thread_name", r, sideTrack(ir.QueueID(qi), true), fmt.Sprintf("%s recv (from rank %d)", q.Name, q.PeerRank)))
			}
		}
	}
	var start time.Duration
	for i, a := range at {
		for r := 0; r < g.Ranks; r++ {
			if local[r] {
				emit(traceEvent{Name: fmt.Sprintf("iteration %d", i), Ph: "X", Pid: r, Ts: micros(start), Dur: micros(iters[i])})
			}
		}
		for id, t := range a {
			if t < 0 {
				continue
			}
			op := &g.Ops[id]
			tid := 1
			if op.Queue != ir.None {
				tid = sideTrack(op.Queue, op.Kind.IsRecvSide())
			}
			emit(traceEvent{Name: op.Name, Ph: "i", S: "t", Pid: int(op.Rank), Tid: tid, Ts: micros(start + t),
				Args: map[string]any{"op": op.Kind.String(), "at": op.Pos.String(), "iteration": i}})
		}
		start += iters[i]
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// traceEvent is one entry of the trace-event format; Ts and Dur are in microseconds.
type traceEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	S    string         `json:"s,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

func meta(kind string, pid, tid int, name string) traceEvent {
	return traceEvent{Name: kind, Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": name}}
}

// sideTrack numbers the track of one side of queue q: 0 and 1 are a rank's iterations and host ops.
func sideTrack(q ir.QueueID, recv bool) int {
	t := 2 + 2*int(q)
	if recv {
		t++
	}
	return t
}

func micros(d time.Duration) float64 { return float64(d) / 1e3 }
