package coredag

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/provider"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planset"
)

// Sentinel errors: every error of this package wraps one of them (or is a *CheckError); test
// with errors.Is. The messages say what happened and what to do.
var (
	// ErrUnbound: Start before every extern buffer of this process's ranks is bound.
	ErrUnbound = errors.New("coredag: buffer not bound")
	// ErrBusy: Start while the previous start is in flight (Wait or Test for it first), a
	// bind while a start is in flight, or a Wait whose context ended first (the start goes on).
	ErrBusy = errors.New("coredag: a start is in flight")
	// ErrClosed: the Plan or Coll was closed (a Close during a start ends that start with it).
	ErrClosed = errors.New("coredag: closed")
	// ErrWorld: the World does not fit the plan (its size differs from the plan's ranks, its
	// rank is out of range), or one of its calls failed (a peer died, or did not answer within
	// the hang timeout): the message names the rank where the World or the engine can tell.
	ErrWorld = errors.New("coredag: world")
	// ErrTimeout: a start made no progress for Options.HangTimeout (a peer stopped, or the plan
	// met a NIC that cannot run it): the message lists the stuck queues and the ranks they wait for.
	ErrTimeout = errors.New("coredag: no progress within the hang timeout")
	// ErrBind: memory that does not fit a buffer (size, element type, alignment), an unknown
	// buffer or rank, or a rebinding this release cannot do; the message names the buffer's
	// declaration as file:line:col.
	ErrBind = errors.New("coredag: bind")
	// ErrProvider: the provider could not be opened, cannot run the plan (engine, target), or
	// failed to release what it holds at Close (the message names the rank and the object).
	ErrProvider = errors.New("coredag: provider")
	// ErrLimit: a Start past the most iterations the plan allows: a triggered plan's counters
	// and a plan's watched words are never reset between starts, and this one would overflow
	// or wrap one (the message names it and how many starts fit). A Coll joined anew starts
	// from the beginning.
	ErrLimit = errors.New("coredag: iteration limit")
	// ErrArg: an option or argument is wrong (unknown engine, bad params).
	ErrArg = errors.New("coredag: invalid argument")
	// ErrInternal: a bug in coredag (a recovered panic, an impossible state); please report it.
	ErrInternal = errors.New("coredag: internal error")
)

// MaxHangTimeout is the longest Options.HangTimeout: a day.
const MaxHangTimeout = 24 * time.Hour

// Options say how a plan is opened and run.
type Options struct {
	// Params sets plan params, as `coredag run -p NAME=VALUE` does (for instance the element
	// count of an allreduce, or ranks).
	Params map[string]int64
	// Target is the compilation target ("connectx", "generic", ...); "" lets the engine choose
	// (exec.Select).
	Target string
	// Engine is "auto" (the default: offload when the NIC has cross-channel or triggered
	// operations, else poll), "offload" or "poll".
	Engine string
	// Provider names the NIC in the provider table: "softnic" (the default; every rank in this
	// process), "ofi" (libfabric; a build with -tags ofi) or "verbs" (a build with -tags verbs).
	Provider string
	// OFIProvider is the libfabric provider of Provider "ofi", e.g. "shm", "tcp;ofi_rxm" or
	// "sockets" ("": the first offering what coredag needs).
	OFIProvider string
	// OFIAddr is where Provider "ofi"'s endpoints bind when its provider runs over IP (sockets,
	// tcp;ofi_rxm, verbs;ofi_rxm): an IPv4 address of this host or an interface name (its first
	// IPv4 address). "" means 127.0.0.1 when every rank runs on this host, and across hosts (or
	// network namespaces) the network of this host, the fastest link first, in which every
	// other host has an address of its own. Where no network joins them (hosts on subnets
	// behind a router), ranks on BootstrapWorld bind the address on which their host reaches
	// rank 0's bootstrap, and Init refuses another World: OFIAddr then chooses, each process
	// its own host's address or the same interface name on every host.
	OFIAddr string
	// Device is the RDMA device of Provider "verbs" (e.g. "mlx5_0"; "": the first).
	Device string
	// Extern names more buffers the caller binds, beside those the plan declares extern: for
	// plans that cannot declare them (an MSCCL .xml algorithm's buffers) or were written before
	// the keyword existed. A buffer holding a word that a wait watches stays coredag's (ErrArg),
	// as check refuses it declared extern.
	Extern []string
	// HangTimeout bounds every wait of a start and every World call: a start that makes no
	// progress for this long ends with ErrTimeout (or ErrWorld). 0 means exec.DefaultHangTimeout;
	// at most MaxHangTimeout.
	HangTimeout time.Duration
	// Progress says which thread moves a start across processes: "background" (the default:
	// a goroutine of the Coll, while the caller computes) or "caller" (Wait, on the caller's
	// thread: no hand-off between threads, which costs most when processes outnumber cores).
	// With "caller" a peer's start moves only while its process waits for it: every process
	// must wait for its Colls' starts in one order, as with MPI's blocking collectives, and a
	// Wait whose ctx can end still hands the start to the background, as does Test. A nil
	// World, or one of one rank, always runs a start in Wait (Coll.Wait).
	Progress string
	// Memory is the memory budget of opening the plan, in bytes, as coredag's --mem: a plan
	// whose elaboration or proof would need more is refused with the figure (a *CheckError)
	// instead of exhausting the process. 0 means COREDAG_MEM, else 80% of what the machine,
	// its cgroup and ulimit -v leave.
	Memory int64
}

// memoryKnob is how messages name Options.Memory, and the C library's option that sets it.
var memoryKnob = budget.Knob{Name: "Options.Memory or C's mem=", Form: "Options.Memory = %[2]s or C's mem=%[1]s"}

// budget resolves the memory budget o sets, else COREDAG_MEM's, else the machine's.
func (o Options) budget() (budget.Budget, error) {
	if o.Memory < 0 {
		return budget.Budget{}, fmt.Errorf("%w: Options.Memory %d: want 0 (COREDAG_MEM, else the machine's) or a number of bytes", ErrArg, o.Memory)
	}
	var v string
	if o.Memory > 0 {
		v = strconv.FormatInt(o.Memory, 10)
	}
	b, err := budget.Resolve(memoryKnob, v, os.Getenv)
	if err != nil {
		return b, fmt.Errorf("%w: %v", ErrArg, err)
	}
	return b, nil
}

// CheckError is the error of a plan that does not load or does not pass `coredag check`: the
// positioned diagnostics, one "file:line:col: message" line each.
type CheckError struct {
	diags diag.List
	err   error // when the failure is not a list of diagnostics (a bad param)
}

// Error is the diagnostics, one per line.
func (e *CheckError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return e.diags.Error()
}

// Diagnostics are the positioned diagnostics, with their codes, related positions and fixes
// (nil when the failure was not positioned, like an unknown param).
func (e *CheckError) Diagnostics() []*diag.Diagnostic { return e.diags }

// Unwrap gives the underlying error.
func (e *CheckError) Unwrap() error {
	if e.err != nil {
		return e.err
	}
	return e.diags
}

// Plan is a checked plan, ready to Init on a World. It is safe for concurrent use; each Init
// makes an independent Coll.
type Plan struct {
	name   string
	graph  *ir.Graph
	opts   Options
	engine exec.Engine
	prov   provider.Entry
	closed atomic.Bool
}

// BufferInfo describes one buffer of a plan.
type BufferInfo struct {
	Name   string
	Elem   string // element type: u8, i32, u32, i64, u64, f32 or f64
	Count  int64  // elements
	Bytes  int64
	Extern bool   // the caller binds its memory (Coll.Bind); else coredag's scratch
	Remote bool   // peers access it one-sidedly (remote_write, remote_read, remote_atomic)
	Pos    string // where it is declared, file:line:col
}

// Open reads and checks a plan file: a .dag plan or an MSCCL .xml algorithm. A file larger
// than 16 MiB (dsl.MaxSource) is refused with ErrArg.
func Open(path string, opts Options) (*Plan, error) {
	src, err := dsl.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrArg, err)
	}
	return OpenSource(path, src, opts)
}

// OpenSource checks a plan given as text; name is the file name diagnostics use (an .xml name
// reads the text as an MSCCL algorithm). A plan that fails check does not open: the error is a
// *CheckError. A plan set (a .set name, or text that begins as a set does) is refused with
// ErrArg: OpenSet opens sets.
func OpenSource(name string, src []byte, opts Options) (p *Plan, err error) {
	defer recoverInto(&err)
	if planset.IsSet(name, src) {
		return nil, fmt.Errorf("%w: %s is a plan set, not a plan: open it with OpenSet and Set.Open (from C, coredag_plan_open_set), which pick its plan for a message size", ErrArg, name)
	}
	if opts.Engine == "" {
		opts.Engine = "auto"
	}
	if opts.Provider == "" {
		opts.Provider = "softnic"
	}
	if opts.HangTimeout < 0 || opts.HangTimeout > MaxHangTimeout {
		return nil, fmt.Errorf("%w: Options.HangTimeout %v: want 0 (the default, %v) up to %v", ErrArg, opts.HangTimeout, exec.DefaultHangTimeout, MaxHangTimeout)
	}
	switch opts.Progress {
	case "", "background", "caller":
	default:
		return nil, fmt.Errorf("%w: Options.Progress %q (C: progress=%[2]s): want background or caller", ErrArg, opts.Progress)
	}
	engine, err := exec.ParseEngine(opts.Engine)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrArg, err)
	}
	prov, err := provider.Usable(opts.Provider)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProvider, err)
	}
	// Like the command, the library refuses a plan that would not fit in the memory budget.
	b, err := opts.budget()
	if err != nil {
		return nil, err
	}
	// Races are proven under the ordering between the ops of a queue of the target, or of the
	// default targets (RC); Init refuses a provider that does not grant what the plan relies on.
	po := planner.Within(b)
	target := opts.Target
	if target == "" {
		target = exec.DefaultTarget(engine, nic.Caps{})
	}
	t, err := ir.LookupTarget(target)
	if err != nil {
		return nil, fmt.Errorf("%w: Options.Target (C: target=): %v", ErrArg, err)
	}
	po.Verify.Order, po.Verify.Target = t.Order, t.Name
	g, err := planner.Load(context.Background(), name, src, opts.Params, po)
	if err != nil {
		var l diag.List
		if errors.As(err, &l) {
			return nil, &CheckError{diags: l}
		}
		return nil, &CheckError{err: err}
	}
	var waits []ir.OpID // by buffer, once an extern name needs them
	for _, x := range opts.Extern {
		id, ok := exec.BufferByName(g, x)
		if !ok {
			return nil, fmt.Errorf("%w: Options.Extern (C: extern=) names buffer %q, which plan %s does not declare", ErrArg, x, g.Name)
		}
		if waits == nil {
			waits = g.WordWaits()
		}
		if w := waits[id]; w != ir.None {
			b := &g.Buffers[id]
			return nil, fmt.Errorf("%w: Options.Extern (C: extern=) names buffer %s (%s), which holds the word that wait %s watches: check proved the wait from the word's init, so the buffer stays coredag's", ErrArg, b.Name, b.Pos, g.Ops[w].Name)
		}
		g.Buffers[id].Extern = true
	}
	return &Plan{name: name, graph: g, opts: opts, engine: engine, prov: prov}, nil
}

// Name is the plan's name (its `plan` line).
func (p *Plan) Name() string { return p.graph.Name }

// Ranks is the number of ranks the plan runs on: the World's size must equal it.
func (p *Plan) Ranks() int { return p.graph.Ranks }

// Buffers lists the plan's buffers in declaration order.
func (p *Plan) Buffers() []BufferInfo {
	out := make([]BufferInfo, len(p.graph.Buffers))
	for i := range p.graph.Buffers {
		b := &p.graph.Buffers[i]
		out[i] = BufferInfo{Name: b.Name, Elem: b.Type.String(), Count: b.Count, Bytes: b.Bytes(), Extern: b.Extern,
			Remote: b.Access&(ir.RemoteWrite|ir.RemoteRead|ir.RemoteAtomic) != 0, Pos: b.Pos.String()}
	}
	return out
}

// Graph is the checked plan, for tools that want to look inside (listing, drawing).
func (p *Plan) Graph() *ir.Graph { return p.graph }

// Close marks the plan closed: later Inits fail with ErrClosed. Open Colls are not affected.
// Close may be called from any goroutine and more than once; on a nil Plan (an Open that
// failed) it does nothing.
func (p *Plan) Close() error {
	if p != nil {
		p.closed.Store(true)
	}
	return nil
}

// recoverInto turns a panic into an ErrInternal error: no panic crosses the API.
func recoverInto(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: panic: %v", ErrInternal, r)
	}
}

// firstLine is the first line of a message.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
