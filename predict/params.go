// Package predict is coredag's cost model: a discrete-event simulation of a compiled ir.Plan
// under LogGP-style parameters (latency L, overhead o, gap g, time per byte G) extended with
// what a collective schedule's host side costs (posting a work request, polling a completion,
// a host step and its reduction per byte) and with how the ranks share the machine's threads.
//
// The simulation walks the plan as the engines run it: each work queue in FIFO order on its
// rank's NIC, a WAIT holding its queue until its CQ reaches the count, an ENABLE letting a
// managed queue run, triggered work firing when its counter reaches the threshold, and, on
// targets without cross-channel, the polling engine's CPU posting each op once its
// predecessors completed. It predicts one iteration and says why it took that long (Result).
package predict

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/coredag/coredag/internal/boundedio"
)

// Params are the machine figures the model runs on, in nanoseconds (and nanoseconds per byte).
// `coredag calibrate` measures them; Default is a guess for an RDMA NIC.
type Params struct {
	// Provider and Target say what the figures were measured on (informative).
	Provider string `json:"provider"`
	Target   string `json:"target,omitempty"`
	// Note says how the figures were obtained.
	Note string `json:"note,omitempty"`

	L float64 `json:"L_ns"`          // wire latency of one message
	O float64 `json:"o_ns"`          // NIC time per message at each end (sender and receiver)
	G float64 `json:"g_ns"`          // least time between the starts of two messages of one queue
	B float64 `json:"G_ns_per_byte"` // NIC time per byte sent (1 / bandwidth)
	// Post is the CPU time to post one work request (or to fire one triggered entry).
	Post float64 `json:"post_ns"`
	// Poll is the CPU time to handle one completion.
	Poll float64 `json:"poll_ns"`
	// Ctrl is the NIC time of a WAIT, an ENABLE or a NOP entry.
	Ctrl float64 `json:"ctrl_ns"`
	// CQ is what a message waits per completion queue its engine polls in a round. An engine
	// that polls every CQ in turn, on a provider that moves data only inside its polls (libfabric
	// with manual progress), sends a message when its queue's CQ comes round and receives it when
	// the receiver's does: half a round at each end on average, a round being every CQ the
	// engine's thread polls (every rank's with shared workers, the rank's own otherwise).
	CQ float64 `json:"cq_ns,omitempty"`
	// Imm is the NIC time a write with immediate costs its sender beyond another message: where
	// it is two operations (libfabric's write, then a message carrying the immediate), the second.
	Imm float64 `json:"imm_ns,omitempty"`
	// Host is the fixed CPU time of a host step (reduce, copy, nop).
	Host float64 `json:"host_ns"`
	// Reduce and Copy are the CPU time per byte of a host reduce and of a host copy.
	Reduce float64 `json:"reduce_ns_per_byte"`
	Copy   float64 `json:"copy_ns_per_byte"`
	// Mem is what a byte costs more, on the NIC or the CPU, when it misses the caches;
	// CacheBytes is the memory the caches hold. The share of bytes that miss is taken as
	// 1 - CacheBytes / footprint, the footprint being every buffer of the ranks that share
	// the caches (every rank with shared workers, one rank otherwise); 0 when it fits.
	Mem        float64 `json:"mem_ns_per_byte"`
	CacheBytes float64 `json:"cache_bytes"`
	// Workers is how many threads do every rank's CPU and NIC work: 0 means each rank has a CPU
	// and a NIC of its own (one process per rank on real NICs); n > 0 means all of it shares n
	// threads, as the in-process software NIC, where one thread runs every rank.
	Workers int `json:"workers"`
}

// Default is a guess for a 100 Gb/s RDMA NIC with one process per rank: 1.5 µs latency,
// 12.5 GB/s, 100 ns to post, a host reduce at 5 GB/s. Calibrate to replace it.
func Default() Params {
	return Params{Provider: "guess", Note: "a guess for a 100 Gb/s RDMA NIC, one process per rank; run coredag calibrate",
		L: 1500, O: 100, G: 20, B: 0.08, Post: 100, Poll: 50, Ctrl: 20, Host: 100, Reduce: 0.2, Copy: 0.1}
}

// fields lists the figures by their JSON names, for validation and for fitting.
func (p *Params) fields() []struct {
	name string
	v    *float64
} {
	return []struct {
		name string
		v    *float64
	}{{"L_ns", &p.L}, {"o_ns", &p.O}, {"g_ns", &p.G}, {"G_ns_per_byte", &p.B}, {"post_ns", &p.Post},
		{"poll_ns", &p.Poll}, {"ctrl_ns", &p.Ctrl}, {"cq_ns", &p.CQ}, {"imm_ns", &p.Imm}, {"host_ns", &p.Host}, {"reduce_ns_per_byte", &p.Reduce}, {"copy_ns_per_byte", &p.Copy},
		{"mem_ns_per_byte", &p.Mem}, {"cache_bytes", &p.CacheBytes}}
}

// maxFigure bounds every figure (ns, ns per byte, bytes: 1e15 ns is 11 days), so that no sum
// of them in a simulation overflows to infinity.
const maxFigure = 1e15

// Validate reports a figure that is negative, too large or not a number, or a negative worker
// count.
func (p *Params) Validate() error {
	for _, f := range p.fields() {
		if math.IsNaN(*f.v) || *f.v < 0 || *f.v > maxFigure {
			return fmt.Errorf("%s is %v: every figure must be a number from 0 to %g", f.name, *f.v, maxFigure)
		}
	}
	if p.Workers < 0 {
		return fmt.Errorf("workers is %d: must be >= 0 (0: each rank has its own CPU and NIC)", p.Workers)
	}
	return nil
}

// maxParamsFile is the largest parameter file ReadParams reads: one is a few hundred bytes.
const maxParamsFile = 1 << 20

// ReadParams reads a parameter file written by calibrate (or by hand). Unknown fields and bad
// figures are errors naming the file, and so is a file past 1 MiB.
func ReadParams(path string) (Params, error) {
	b, err := boundedio.ReadFile(path, maxParamsFile)
	switch {
	case errors.As(err, new(*boundedio.TooLargeError)):
		return Params{}, fmt.Errorf("%s: %w: not a parameter file", path, err)
	case err != nil:
		return Params{}, err
	}
	return ParseParams(path, b)
}

// ParseParams decodes a parameter file's contents; name is used in errors.
func ParseParams(name string, b []byte) (Params, error) {
	var p Params
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(b, se.Offset)
			return Params{}, fmt.Errorf("%s:%d:%d: %v", name, line, col, err)
		}
		return Params{}, fmt.Errorf("%s: %v", name, err)
	}
	if err := p.Validate(); err != nil {
		return Params{}, fmt.Errorf("%s: %v", name, err)
	}
	return p, nil
}

// Encode is the parameter file's contents.
func (p Params) Encode() []byte {
	b, _ := json.MarshalIndent(p, "", "  ")
	return append(b, '\n')
}

func lineCol(b []byte, off int64) (int, int) {
	line, col := 1, 1
	for i := int64(0); i < off && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
