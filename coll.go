package coredag

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/ofi"
	"github.com/coredag/coredag/exec/provider"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/planner/verify"
)

// Coll is a persistent collective: a plan joined to a World, run on the caller's bound memory
// by Start and Wait as often as the caller likes. A Coll is used by one goroutine at a time,
// except Close, which any goroutine may call.
//
// The first Start allocates the scratch buffers, registers the bound memory and creates and
// connects every queue: it is collective (every rank's first Start takes part, through the
// World) and its background part takes as long as the setup; later Starts only post work.
type Coll struct {
	plan  *Plan
	world World // nil: every rank here
	ranks []int // the ranks this process runs
	prov  nic.Provider
	op    *exec.Op
	hang  time.Duration

	mu     sync.Mutex // guards pins and closed against a Close from another goroutine
	pins   map[pinKey]*runtime.Pinner
	closed bool
	// closeDone ends when the first Close has done its work, whose result closeErr is: a Close
	// that comes meanwhile waits for it, so that none returns while bound memory is in use.
	closeDone chan struct{}
	closeErr  error
	wctx      worldCtx // bounds every World call of the background by the hang timeout

	syncSend [8]byte // the word every start's first barrier allgathers (Coll.sync)
	syncRecv []byte
}

type pinKey struct {
	rank int
	buf  ir.BufID
}

// Init joins the World and readies the plan on it: the World's size must equal Plan.Ranks
// (ErrWorld otherwise, on every rank). A nil World runs every rank of the plan in this process
// (then the provider must run every rank in one process: the software NIC, or ofi).
//
// Init opens the provider and compiles the plan for it; every rank of the World calls Init.
// Several Colls of one plan may be open at once, each with its own queues. ctx bounds the
// joining and the compiling: once it ends, Init returns its cause (context.Cause), which
// errors.Is tells apart. A nil ctx is context.Background().
func (p *Plan) Init(ctx context.Context, w World) (c *Coll, err error) {
	defer recoverInto(&err)
	if ctx == nil {
		ctx = context.Background()
	}
	if p == nil {
		return nil, fmt.Errorf("%w: Init on a nil Plan (did Open fail?)", ErrArg)
	}
	if p.closed.Load() {
		return nil, fmt.Errorf("%w: Init on a closed plan %s", ErrClosed, p.graph.Name)
	}
	g := p.graph
	hang := p.opts.HangTimeout
	if hang <= 0 {
		hang = exec.DefaultHangTimeout
	}
	var ranks []int
	cfg := provider.Config{OFIProvider: p.opts.OFIProvider, OFIAddr: p.opts.OFIAddr, Device: p.opts.Device, GIDIndex: -1, Rank: -1, Ranks: g.Ranks}
	if w == nil {
		if !p.prov.AllRanks {
			return nil, fmt.Errorf("%w: provider %s runs one rank per process: pass a World (BootstrapWorld, or the caller's; in C a coredag_world, or NULL in processes a launcher started)", ErrArg, p.prov.Name)
		}
		for r := 0; r < g.Ranks; r++ {
			ranks = append(ranks, r)
		}
	} else {
		if w.Size() != g.Ranks || w.Rank() < 0 || w.Rank() >= w.Size() {
			return nil, fmt.Errorf("%w: the world has %d ranks (this is rank %d), plan %s has %d: start %d processes or set the plan's ranks param to %d",
				ErrWorld, w.Size(), w.Rank(), g.Name, g.Ranks, g.Ranks, w.Size())
		}
		if !p.prov.PerProcess && g.Ranks > 1 {
			return nil, fmt.Errorf("%w: provider %s runs every rank in one process: open the plan with a nil World (in C a NULL world in a process no launcher started), or use provider ofi or verbs", ErrArg, p.prov.Name)
		}
		ranks = []int{w.Rank()}
		cfg.Rank = w.Rank()
		// Every rank checks that the others run the same plan with the same ranks before any
		// queue is made: a mismatch is an error on every rank, not a hang. So is a world across
		// hosts that the provider's addresses cannot join.
		hosts, err := agreeOnPlan(ctx, w, g, hang)
		if err != nil {
			return nil, err
		}
		if cfg.OFIAddr, err = p.endpointAddr(w, hosts); err != nil {
			return nil, err
		}
	}
	if g.Relies != nil {
		cfg.Order = uint64(g.Relies.Order)
	}
	cfg.NoAtomics = !g.HasAtomics()
	prov, err := p.prov.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProvider, err)
	}
	fail := func(err error) (*Coll, error) {
		_ = prov.Close()
		return nil, err
	}
	engine, target, err := exec.Select(p.engine, p.opts.Target, prov.Caps())
	if err != nil {
		return fail(fmt.Errorf("%w: %v", ErrProvider, err))
	}
	plan, err := lower.Compile(ctx, g, target)
	if cause := stop.Stopped(ctx, err); cause != nil {
		return fail(fmt.Errorf("coredag: compile plan %s for target %s: %w", g.Name, target.Name, cause))
	}
	if err != nil {
		return fail(fmt.Errorf("%w: compile plan %s for target %s: %v", ErrProvider, g.Name, target.Name, err))
	}
	c = &Coll{plan: p, world: w, ranks: ranks, prov: prov, hang: hang, pins: map[pinKey]*runtime.Pinner{}}
	// A Coll dropped without Close must not take its host process down: the runtime panics when
	// it collects a Pinner that still pins memory. The pins go with the Coll.
	runtime.AddCleanup(c, unpinAll, c.pins)
	opts := exec.Options{Engine: engine, HangTimeout: hang, Ranks: ranks, WaitProgress: p.opts.Progress == "caller"}
	if w != nil {
		c.wctx.init(hang)
		opts.Exchange = exchangeOver(w, g.Ranks, hang)
		opts.Barrier = c.barrier
		opts.Sync = c.sync
		opts.Unfenced = unfenced(plan.Graph)
		c.syncRecv = make([]byte, 8*w.Size())
	}
	if c.op, err = exec.NewOp(plan, prov, opts); err != nil {
		if errors.Is(err, exec.ErrOrder) {
			return fail(fmt.Errorf("%w: %w", ErrProvider, err))
		}
		return fail(fmt.Errorf("%w: %v", ErrProvider, err))
	}
	return c, nil
}

// unfenced says which World calls of every start the plan makes unnecessary (verify.Fences):
// the start's allgather stays while an extern buffer is accessed one-sidedly, since it tells
// every process that one rebound such a buffer.
func unfenced(g *ir.Graph) exec.Unfenced {
	start, landed, done := verify.Fences(g)
	for i := range g.Buffers {
		if b := &g.Buffers[i]; b.Extern && b.Access&(ir.RemoteWrite|ir.RemoteRead|ir.RemoteAtomic) != 0 {
			start = true
		}
	}
	return exec.Unfenced{Start: !start, EndLanded: !landed, EndDone: !done}
}

// agreeOnPlan allgathers every rank's view of the plan (its ranks and a fingerprint of its
// buffers) and where it runs (hostPart), and reports the first rank that differs in the plan.
// It returns every rank's hostPart.
func agreeOnPlan(parent context.Context, w World, g *ir.Graph, hang time.Duration) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(parent, hang)
	defer cancel()
	own := planPrint(g)
	plan := len(own)
	own = append(own, hostPart(ofi.HostInterfaces)...)
	n := len(own)
	all := make([]byte, n*w.Size())
	if err := w.Allgather(ctx, own, all); err != nil {
		if cause := stop.Stopped(parent, err); cause != nil {
			return nil, fmt.Errorf("coredag: Init: allgather of the plan's shape: %w", cause)
		}
		return nil, fmt.Errorf("%w: Init: allgather of the plan's shape: %v", ErrWorld, err)
	}
	hosts := make([][]byte, w.Size())
	for r := range hosts {
		if string(all[r*n:r*n+plan]) != string(own[:plan]) {
			return nil, fmt.Errorf("%w: rank %d opened another plan, or the same one with other params, than rank %d (%s, %d ranks)", ErrWorld, r, w.Rank(), g.Name, g.Ranks)
		}
		hosts[r] = all[r*n+plan : (r+1)*n]
	}
	return hosts, nil
}

// endpointAddr is where the endpoints of w's rank bind (provider.Config.OFIAddr) when the ranks
// run where hosts (agreeOnPlan) say. On one host, or for a provider that picks its own
// addresses, it is Options.OFIAddr. Across hosts a provider over IP needs an address off
// loopback: OFIAddr, else the first network of this host that joins it to every other
// (joinAddr), else, on BootstrapWorld, the address on which this host reaches rank 0's
// bootstrap (hosts on subnets behind a router); shm cannot join hosts. Every rank sees the same
// hosts, so either every rank refuses or none does.
func (p *Plan) endpointAddr(w World, hosts [][]byte) (string, error) {
	shm := strings.HasPrefix(p.opts.OFIProvider, "shm")
	if !p.prov.Loopback || p.opts.OFIAddr != "" && !shm {
		return p.opts.OFIAddr, nil
	}
	addr, err := joinAddr(w.Rank(), hosts)
	bw, _ := w.(*bootWorld)
	switch {
	case addr == "" && err == nil: // one host
		return p.opts.OFIAddr, nil
	case shm:
		return "", fmt.Errorf("%w: the ranks run on several hosts (or network namespaces), and libfabric's shm joins the processes of one host: use a provider over the network, e.g. tcp;ofi_rxm", ErrWorld)
	case err != nil && bw != nil && bw.local != "":
		return bw.local, nil
	case err != nil:
		return "", fmt.Errorf("%w: %v", ErrWorld, err)
	}
	return addr, nil
}

// planPrint is a fixed-size fingerprint of what ranks must agree on: ranks, ops, buffers.
func planPrint(g *ir.Graph) []byte {
	h := uint64(14695981039346656037)
	mix := func(v uint64) {
		for i := 0; i < 8; i++ {
			h ^= v & 0xff
			h *= 1099511628211
			v >>= 8
		}
	}
	mix(uint64(g.Ranks))
	mix(uint64(len(g.Ops)))
	for i := range g.Buffers {
		b := &g.Buffers[i]
		for _, ch := range []byte(b.Name) {
			mix(uint64(ch))
		}
		mix(uint64(b.Count))
		mix(uint64(b.Type))
	}
	out := make([]byte, 8)
	for i := range out {
		out[i] = byte(h >> (8 * i))
	}
	return out
}

// Ranks are the ranks this Coll runs: the World's rank, or every rank for a nil World.
func (c *Coll) Ranks() []int { return append([]int(nil), c.ranks...) }

// Engine is the engine the Coll runs: "offload" or "poll".
func (c *Coll) Engine() string { return c.op.Engine().String() }

// Bind binds buffer to mem on this process's rank (a World of one rank per process). See
// BindRank.
func (c *Coll) Bind(buffer string, mem []byte) error {
	if len(c.ranks) != 1 {
		return fmt.Errorf("%w: bind %s: this Coll runs %d ranks (a nil World): use BindRank (C: coredag_coll_bind_rank)", ErrBind, buffer, len(c.ranks))
	}
	return c.BindRank(c.ranks[0], buffer, mem)
}

// BindRank binds an extern buffer of rank to mem, which must be exactly the buffer's size in
// bytes and aligned to its element size. The memory is pinned, registered with the NIC by the
// first Start, and stays in use until it is rebound or the Coll closed.
//
// Binding again between starts replaces the memory: the new memory is registered at once and
// the prebuilt work requests move to it. When peers access the buffer one-sidedly
// (remote_write, remote_read, remote_atomic) they learn its new address and key at the next
// Start, through the World (every start begins with an allgather of one word that says whether
// a rank rebound such a buffer; only then is there a second exchange): a rank may rebind alone.
func (c *Coll) BindRank(rank int, buffer string, mem []byte) error {
	var p unsafe.Pointer
	if len(mem) > 0 {
		p = unsafe.Pointer(unsafe.SliceData(mem))
	}
	return c.bind(rank, buffer, p, len(mem), mem != nil)
}

// BindPointer binds buffer, on this process's rank, to nbytes at p: memory coredag does not
// own (C memory, or Go memory the caller keeps pinned and alive). The rules of BindRank apply.
func (c *Coll) BindPointer(buffer string, p unsafe.Pointer, nbytes int) error {
	if len(c.ranks) != 1 {
		return fmt.Errorf("%w: bind %s: this Coll runs %d ranks (a nil World): use BindRank (C: coredag_coll_bind_rank)", ErrBind, buffer, len(c.ranks))
	}
	return c.bind(c.ranks[0], buffer, p, nbytes, false)
}

// Elem is the Go element types of plan buffers: u8, i32, u32, i64, u64, f32, f64.
type Elem interface {
	~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// BindSlice binds buffer on rank to s, checking that T is the buffer's element type and len(s)
// its element count (BindRank checks bytes only).
func BindSlice[T Elem](c *Coll, rank int, buffer string, s []T) error {
	b, err := c.buffer(buffer)
	if err != nil {
		return err
	}
	var zero T
	want, ok := map[reflect.Kind]ir.ElemType{reflect.Uint8: ir.U8, reflect.Int32: ir.I32, reflect.Uint32: ir.U32,
		reflect.Int64: ir.I64, reflect.Uint64: ir.U64, reflect.Float32: ir.F32, reflect.Float64: ir.F64}[reflect.TypeOf(zero).Kind()]
	if !ok {
		return fmt.Errorf("%w: %s: buffer %s holds %s, bound to a slice of %T", ErrBind, b.Pos, b.Name, b.Type, zero)
	}
	if want != b.Type {
		return fmt.Errorf("%w: %s: buffer %s holds %s, bound to a slice of %T", ErrBind, b.Pos, b.Name, b.Type, zero)
	}
	if int64(len(s)) != b.Count {
		return fmt.Errorf("%w: %s: buffer %s has %d elements, bound to a slice of %d", ErrBind, b.Pos, b.Name, b.Count, len(s))
	}
	var p unsafe.Pointer
	if len(s) > 0 {
		p = unsafe.Pointer(unsafe.SliceData(s))
	}
	return c.bind(rank, buffer, p, len(s)*int(unsafe.Sizeof(zero)), s != nil)
}

func (c *Coll) buffer(name string) (*ir.Buffer, error) {
	g := c.plan.graph
	id, ok := exec.BufferByName(g, name)
	if !ok {
		return nil, fmt.Errorf("%w: plan %s has no buffer %q", ErrBind, g.Name, name)
	}
	return &g.Buffers[id], nil
}

// bind checks and hands the memory to the op; pin says to pin Go memory for the NIC.
func (c *Coll) bind(rank int, buffer string, p unsafe.Pointer, n int, pin bool) (err error) {
	defer recoverInto(&err)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("%w: bind %s on a closed Coll", ErrClosed, buffer)
	}
	b, err := c.buffer(buffer)
	if err != nil {
		return err
	}
	g := c.plan.graph
	id, _ := exec.BufferByName(g, buffer)
	switch {
	case !b.Extern:
		return fmt.Errorf("%w: %s: buffer %s is coredag's scratch, not declared extern: it cannot be bound", ErrBind, b.Pos, b.Name)
	case !c.local(rank):
		return fmt.Errorf("%w: %s: buffer %s on rank %d: this Coll runs rank(s) %v", ErrBind, b.Pos, b.Name, rank, c.ranks)
	}
	var pinner *runtime.Pinner
	if pin && p != nil { // the op refuses a nil address (exec.ErrRegion)
		pinner = new(runtime.Pinner)
		pinner.Pin(p)
	}
	if err := c.op.Bind(rank, id, exec.Region{Addr: p, Len: n}); err != nil {
		if pinner != nil {
			pinner.Unpin()
		}
		return mapErr(err)
	}
	k := pinKey{rank, id}
	if old := c.pins[k]; old != nil {
		old.Unpin()
	}
	c.pins[k] = pinner
	return nil
}

func (c *Coll) local(rank int) bool {
	for _, r := range c.ranks {
		if r == rank {
			return true
		}
	}
	return false
}

// Start starts one iteration of the plan on the bound memory and returns at once; the work
// goes on in the background (on the NIC, and on a goroutine of this Coll that polls and runs
// the host steps) until Test or Wait reports it done. A Wait with a ctx that cannot end that
// comes before the background goroutine took the iteration runs it on the caller's goroutine
// instead (no hand-off between threads); the background goroutine takes an iteration nobody
// took for a millisecond or two. When the Coll runs every rank (a nil World, or one of one
// rank) or Options.Progress is "caller", the background goroutine does not take it: such a
// Wait runs the iteration, or a Test hands it to the background. Until then the bound
// memory is the plan's: do not read or write it. Start allocates nothing.
//
// Errors: ErrUnbound (an extern buffer is not bound), ErrBusy (the previous start was not
// waited for), ErrClosed, and the error that failed an earlier start (a Coll whose start
// failed is unusable but for Close).
func (c *Coll) Start() (err error) {
	defer recoverInto(&err)
	if err := c.op.Start(); err != nil {
		return mapErr(err)
	}
	return nil
}

// Test reports whether the last start is done, without blocking; done with a nil error means
// the iteration completed and the bound memory holds its results. Test after a done start (or
// before any) reports done.
func (c *Coll) Test() (done bool, err error) {
	defer recoverInto(&err)
	done, err = c.op.Test()
	if err != nil {
		return done, mapErr(err)
	}
	return done, nil
}

// Wait waits until the last start is done, or ctx ends: then the start goes on (Wait or Test
// again, or Close), and the error wraps ctx's error and ErrBusy; a start that ended as ctx did
// gives its own result. It returns at once when nothing is in flight. A start that makes no
// progress for the hang timeout ends with ErrTimeout; a World call that fails ends it with
// ErrWorld. A nil ctx is context.Background().
func (c *Coll) Wait(ctx context.Context) (err error) {
	defer recoverInto(&err)
	if ctx == nil {
		ctx = context.Background()
	}
	if err := c.op.Wait(ctx); err != nil {
		return c.blame(mapErr(err))
	}
	return nil
}

// blame adds to a hang the peers this process's stuck queues wait for: a hang in a World is
// most often a peer that stopped.
func (c *Coll) blame(err error) error {
	var h *exec.HangError
	if c.world == nil || !errors.As(err, &h) {
		return err
	}
	g := c.plan.graph
	var peers []int
	for _, s := range h.Stuck {
		name, _, _ := strings.Cut(s.Queue, ".") // the offload engine's work queues are queue.sq, queue.rq
		for q := range g.Queues {
			if gq := &g.Queues[q]; gq.Rank == s.Rank && gq.Name == name && gq.PeerRank != s.Rank && !slices.Contains(peers, gq.PeerRank) {
				peers = append(peers, gq.PeerRank)
			}
		}
	}
	if len(peers) == 0 {
		return err
	}
	slices.Sort(peers)
	return fmt.Errorf("rank %d waits for rank %s (stopped, or too slow for the hang timeout %v): %w", c.world.Rank(), joinInts(peers), c.hang, err)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", rank ")
}

// Close ends the Coll: a start in flight is abandoned (its Wait returns ErrClosed), the queues
// and registrations are released, the provider closed and bound memory unpinned. Close may be
// called from any goroutine and more than once. The World is the caller's: Close leaves it open.
//
// When the last start ended without its end barrier on a NIC moved only by the host's calls
// (the Coll lingers: docs/library.md, Worlds), Close first makes that barrier over the World,
// driving the NIC meanwhile, so that every peer's last start gets the progress it needs: every
// rank then closes (as MPI programs free their requests), and Close waits for the others at
// most the hang timeout (then it returns ErrWorld, the Coll closed all the same).
//
// A Close that comes while another is under way returns when that one does, with its result;
// on a nil Coll (an Init that failed) Close does nothing.
func (c *Coll) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.closeDone // a Close from another goroutine: its end is this one's
		return c.closeErr
	}
	c.closed = true
	c.closeDone = make(chan struct{})
	c.mu.Unlock()
	defer close(c.closeDone)
	c.closeErr = c.close()
	return c.closeErr
}

// close is the first Close's work.
func (c *Coll) close() (err error) {
	defer recoverInto(&err)
	ferr := c.op.Fence() // before the World's context closes: its barrier may be the last call
	c.op.Closing()       // so that a start the closed World ends says it was closed
	c.wctx.close()
	err = c.op.Close()
	if perr := c.prov.Close(); err == nil {
		err = perr
	}
	c.mu.Lock()
	unpinAll(c.pins)
	clear(c.pins)
	c.mu.Unlock()
	if err != nil {
		// ErrProvider where the provider kept an object, ErrTimeout where a start did not stop
		return mapErr(fmt.Errorf("close: %w", err))
	}
	return ferr // a World error (ErrWorld), already wrapped by Coll.barrier
}

// sync is exec.Options.Sync over the World: an allgather of one word per rank, ORed, bounded by
// the hang timeout without allocating.
func (c *Coll) sync(_ context.Context, flags uint64) (uint64, error) {
	binary.LittleEndian.PutUint64(c.syncSend[:], flags)
	c.wctx.arm()
	err := c.world.Allgather(&c.wctx, c.syncSend[:], c.syncRecv)
	c.wctx.disarm()
	if err != nil {
		return 0, c.worldErr("barrier", err)
	}
	var all uint64
	for r := 0; r+8 <= len(c.syncRecv); r += 8 {
		all |= binary.LittleEndian.Uint64(c.syncRecv[r:])
	}
	return all, nil
}

// worldErr wraps a World call's failure in ErrWorld, saying when the hang timeout ended it.
func (c *Coll) worldErr(what string, err error) error {
	if c.wctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("%w: %s: no answer from every rank within %v (a peer stopped, or did not start): %w", ErrWorld, what, c.hang, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrWorld, what, err)
}

// barrier is exec.Options.Barrier over the World, bounded by the hang timeout without
// allocating.
func (c *Coll) barrier(context.Context) error {
	c.wctx.arm()
	err := c.world.Barrier(&c.wctx)
	c.wctx.disarm()
	if err != nil {
		return c.worldErr("barrier", err)
	}
	return nil
}

// mapErr wraps an error of exec in the sentinel of this package that describes it.
func mapErr(err error) error {
	switch {
	case errors.Is(err, exec.ErrSessionClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case errors.Is(err, ErrWorld), errors.Is(err, ErrBind), errors.Is(err, ErrInternal):
		return err
	case errors.Is(err, exec.ErrInFlight): // also Wait's ctx ending first: the start goes on
		return busy{err}
	case errors.Is(err, exec.ErrUnbound):
		return fmt.Errorf("%w: %w", ErrUnbound, err)
	case errors.Is(err, exec.ErrRebindRemote), errors.Is(err, exec.ErrRegion):
		return fmt.Errorf("%w: %w", ErrBind, err)
	case errors.Is(err, exec.ErrHang):
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	case errors.Is(err, exec.ErrPanic):
		return fmt.Errorf("%w: %w", ErrInternal, err)
	case errors.Is(err, ir.ErrIterationLimit):
		return fmt.Errorf("%w: %w", ErrLimit, err)
	}
	return fmt.Errorf("%w: %w", ErrProvider, err)
}

// busy is exec's error for a start in flight: it reads as that error and matches ErrBusy.
type busy struct{ err error }

func (b busy) Error() string   { return "coredag: " + b.err.Error() }
func (b busy) Unwrap() []error { return []error{ErrBusy, b.err} }

// unpinAll lets go of the memory a Coll pinned (its Close, or its collection without one).
func unpinAll(pins map[pinKey]*runtime.Pinner) {
	for _, p := range pins {
		if p != nil {
			p.Unpin()
		}
	}
}
