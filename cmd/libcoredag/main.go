// Command libcoredag is coredag's C interface: built with
//
//	scripts/build-lib.sh PREFIX
//
// (go build -buildmode=c-shared -tags ofi) it is libcoredag.so, whose functions are declared in
// the hand-written coredag.h beside this file. docs/library.md ("C") is the user's guide.
//
// The C entry points (coredag.c) call the cdgo_* exports below. C holds no Go pointer: a handle
// is a C-allocated struct with a runtime/cgo.Handle and the last error's message. Every export
// recovers a panic into COREDAG_ERR_INTERNAL with the message, so none crosses into the host.
package main

/*
#include <stdlib.h>
#include "libcoredag.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/cgo"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/coredag/coredag"
	"github.com/coredag/coredag/exec/bootstrap"
	"github.com/coredag/coredag/internal/budget"
)

func main() {}

// The error codes of coredag.h.
const (
	codeOK       = C.COREDAG_OK
	codeCheck    = C.COREDAG_ERR_CHECK
	codeArg      = C.COREDAG_ERR_ARG
	codeState    = C.COREDAG_ERR_STATE
	codeWorld    = C.COREDAG_ERR_WORLD
	codeTimeout  = C.COREDAG_ERR_TIMEOUT
	codeProvider = C.COREDAG_ERR_PROVIDER
	codeInternal = C.COREDAG_ERR_INTERNAL
	codeLimit    = C.COREDAG_ERR_LIMIT
)

// plan is what a coredag_plan's handle refers to.
type plan struct {
	p     *coredag.Plan
	colls atomic.Int64 // live collectives of the plan: the plan is freed after them
}

// coll is what a coredag_coll's handle refers to.
type coll struct {
	c      *coredag.Coll
	plan   *plan
	closer func() error // the bootstrap world's connections, when coredag made the world
	// inFlight: started and not yet seen complete or failed by test or wait. Freeing is
	// refused then: the bound memory is coredag's until the run is over.
	inFlight bool
}

// setErr replaces the message a handle holds.
func setErr(dst **C.char, msg string) {
	if *dst != nil {
		C.free(unsafe.Pointer(*dst))
	}
	*dst = C.CString(msg)
}

// fail records err (if dst is not nil) and returns its code.
func fail(dst **C.char, code C.int, err error) C.int {
	if dst != nil {
		setErr(dst, err.Error())
	}
	return code
}

// codeOf maps an error of package coredag (each wraps one of its sentinels, or is a
// *CheckError) to coredag.h's codes.
func codeOf(err error) C.int {
	var ce *coredag.CheckError
	switch {
	case err == nil:
		return codeOK
	case errors.As(err, &ce):
		return codeCheck
	case errors.Is(err, coredag.ErrInternal):
		return codeInternal
	case errors.Is(err, coredag.ErrArg), errors.Is(err, coredag.ErrBind):
		return codeArg
	case errors.Is(err, coredag.ErrUnbound), errors.Is(err, coredag.ErrBusy), errors.Is(err, coredag.ErrClosed):
		return codeState
	case errors.Is(err, coredag.ErrWorld):
		return codeWorld
	case errors.Is(err, coredag.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return codeTimeout
	case errors.Is(err, coredag.ErrProvider):
		return codeProvider
	case errors.Is(err, coredag.ErrLimit):
		return codeLimit
	}
	return codeInternal
}

// recoverInto turns a panic of the export it is deferred in into COREDAG_ERR_INTERNAL, with the
// panic's value and stack as the handle's message (when there is a handle to hold it).
func recoverInto(rc *C.int, dst **C.char, fn string) {
	r := recover()
	if r == nil {
		return
	}
	*rc = codeInternal
	if dst != nil {
		setErr(dst, fmt.Sprintf("coredag: internal error in %s (a bug in coredag; please report it): %v\n%s", fn, r, debug.Stack()))
	}
}

func goString(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

// cStrings reads a NULL-ended array of C strings.
func cStrings(a **C.char, what string) ([]string, error) {
	if a == nil {
		return nil, nil
	}
	var out []string
	for i := 0; ; i++ {
		if i >= 1<<16 {
			return nil, fmt.Errorf("%s: more than %d entries: is the array NULL-ended?", what, 1<<16)
		}
		p := *(**C.char)(unsafe.Add(unsafe.Pointer(a), uintptr(i)*unsafe.Sizeof(a)))
		if p == nil {
			return out, nil
		}
		out = append(out, C.GoString(p))
	}
}

// keyValue splits entry i of a params or options array, "KEY=VALUE".
func keyValue(what string, i int, s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	if !ok || k == "" {
		return "", "", fmt.Errorf("%s[%d] = %q: want NAME=VALUE", what, i, s)
	}
	return k, v, nil
}

// openOptions reads coredag_plan_open's params and options arrays.
func openOptions(params, options **C.char) (coredag.Options, error) {
	var opts coredag.Options
	ps, err := cStrings(params, "params")
	if err != nil {
		return opts, err
	}
	for i, s := range ps {
		k, v, err := keyValue("params", i, s)
		if err != nil {
			return opts, err
		}
		n, err := strconv.ParseInt(v, 0, 64)
		if err != nil {
			return opts, fmt.Errorf("params[%d] = %q: the value is not an integer", i, s)
		}
		if opts.Params == nil {
			opts.Params = map[string]int64{}
		}
		if _, twice := opts.Params[k]; twice {
			return opts, fmt.Errorf("params[%d] = %q: %s is given twice", i, s, k)
		}
		opts.Params[k] = n
	}
	kvs, err := cStrings(options, "options")
	if err != nil {
		return opts, err
	}
	for i, s := range kvs {
		k, v, err := keyValue("options", i, s)
		if err != nil {
			return opts, err
		}
		switch k {
		case "provider":
			opts.Provider = v
		case "ofi_provider":
			opts.OFIProvider = v
		case "ofi_addr":
			opts.OFIAddr = v
		case "device":
			opts.Device = v
		case "engine":
			opts.Engine = v
		case "target":
			opts.Target = v
		case "extern":
			for _, name := range strings.Split(v, ",") {
				if name = strings.TrimSpace(name); name != "" {
					opts.Extern = append(opts.Extern, name)
				}
			}
		case "progress":
			opts.Progress = v
		case "mem":
			n, err := budget.Parse(v)
			if err != nil {
				return opts, fmt.Errorf("options[%d] = %q: %v", i, s, err)
			}
			opts.Memory = n
		case "hang_timeout_ms":
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms <= 0 || ms > coredag.MaxHangTimeout.Milliseconds() {
				return opts, fmt.Errorf("options[%d] = %q: want a number of milliseconds from 1 to 86400000", i, s)
			}
			opts.HangTimeout = time.Duration(ms) * time.Millisecond
		default:
			return opts, fmt.Errorf("options[%d] = %q: unknown option %q (known: provider, ofi_provider, ofi_addr, device, engine, target, extern, progress, hang_timeout_ms, mem)", i, s, k)
		}
	}
	return opts, nil
}

// newPlanHandle allocates a coredag_plan in C memory.
func newPlanHandle() *C.struct_coredag_plan {
	return (*C.struct_coredag_plan)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_coredag_plan{}))))
}

// openHandle gives *out a new plan handle that holds the plan open returns, or the message of
// its error with its code; a panic comes back as COREDAG_ERR_INTERNAL. fn names the C function.
func openHandle(out **C.struct_coredag_plan, fn string, open func() (*coredag.Plan, C.int, error)) (rc C.int) {
	if out == nil {
		return codeArg
	}
	h := newPlanHandle()
	*out = h
	if h == nil {
		return codeInternal
	}
	defer recoverInto(&rc, &h.err, fn)
	p, code, err := open()
	if err != nil {
		return fail(&h.err, code, err)
	}
	h.name = C.CString(p.Name())
	h.handle = C.uintptr_t(cgo.NewHandle(&plan{p: p}))
	return codeOK
}

//export cdgo_plan_open
func cdgo_plan_open(path, source *C.char, fromSource C.int, params, options **C.char, out **C.struct_coredag_plan) C.int {
	return openHandle(out, "coredag_plan_open", func() (*coredag.Plan, C.int, error) {
		switch {
		case fromSource == 0 && path == nil:
			return nil, codeArg, errors.New("coredag_plan_open: path is NULL")
		case fromSource != 0 && source == nil:
			return nil, codeArg, errors.New("coredag_plan_open_source: source is NULL")
		}
		opts, err := openOptions(params, options)
		if err != nil {
			return nil, codeArg, err
		}
		var p *coredag.Plan
		if fromSource != 0 {
			name := goString(path)
			if name == "" {
				name = "plan.dag"
			}
			p, err = coredag.OpenSource(name, []byte(C.GoString(source)), opts)
		} else {
			p, err = coredag.Open(C.GoString(path), opts)
		}
		return p, codeOf(err), err
	})
}

//export cdgo_plan_open_set
func cdgo_plan_open_set(set *C.char, nbytes C.size_t, ranks C.int, params, options **C.char, out **C.struct_coredag_plan) C.int {
	return openHandle(out, "coredag_plan_open_set", func() (*coredag.Plan, C.int, error) {
		switch {
		case set == nil:
			return nil, codeArg, errors.New("coredag_plan_open_set: set_path is NULL")
		case ranks < 1:
			return nil, codeArg, fmt.Errorf("coredag_plan_open_set: ranks is %d: want at least 1", int(ranks))
		case uint64(nbytes) > math.MaxInt64:
			return nil, codeArg, fmt.Errorf("coredag_plan_open_set: nbytes is %d: want at most %d", uint64(nbytes), int64(math.MaxInt64))
		}
		opts, err := openOptions(params, options)
		if err != nil {
			return nil, codeArg, err
		}
		s, err := coredag.OpenSet(C.GoString(set))
		if err != nil {
			return nil, codeOf(err), err
		}
		p, err := s.Open(int64(nbytes), int(ranks), opts)
		return p, codeOf(err), err
	})
}

// planOf returns the plan behind h, or an error code for a NULL or failed handle.
func planOf(h *C.struct_coredag_plan) (*plan, C.int) {
	if h == nil {
		return nil, codeArg
	}
	if h.handle == 0 {
		return nil, codeState // the handle's message stays the reason it did not open
	}
	return cgo.Handle(h.handle).Value().(*plan), codeOK
}

//export cdgo_plan_ranks
func cdgo_plan_ranks(h *C.struct_coredag_plan) (n C.int) {
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	if h == nil || h.handle == 0 {
		return 0
	}
	return C.int(cgo.Handle(h.handle).Value().(*plan).p.Ranks())
}

//export cdgo_plan_buffer_size
func cdgo_plan_buffer_size(h *C.struct_coredag_plan, buffer *C.char, nbytes *C.size_t) (rc C.int) {
	if h == nil {
		return codeArg
	}
	defer recoverInto(&rc, &h.err, "coredag_plan_buffer_size")
	p, rc := planOf(h)
	if p == nil {
		return rc
	}
	if buffer == nil || nbytes == nil {
		return fail(&h.err, codeArg, errors.New("coredag_plan_buffer_size: buffer or nbytes is NULL"))
	}
	name := C.GoString(buffer)
	var names []string
	for _, b := range p.p.Buffers() {
		if b.Name == name {
			*nbytes = C.size_t(b.Bytes)
			return codeOK
		}
		names = append(names, b.Name)
	}
	return fail(&h.err, codeArg, fmt.Errorf("coredag_plan_buffer_size: the plan has no buffer %q (it has %s)", name, strings.Join(names, ", ")))
}

//export cdgo_plan_free
func cdgo_plan_free(h *C.struct_coredag_plan) (rc C.int) {
	if h == nil {
		return codeOK
	}
	defer recoverInto(&rc, &h.err, "coredag_plan_free")
	if h.handle != 0 {
		p := cgo.Handle(h.handle).Value().(*plan)
		if n := p.colls.Load(); n > 0 {
			return fail(&h.err, codeState, fmt.Errorf("coredag_plan_free: %d collective(s) of the plan are not freed: free them first (coredag_coll_free)", n))
		}
		err := p.p.Close()
		cgo.Handle(h.handle).Delete()
		h.handle = 0
		if err != nil {
			rc = codeOf(err)
			// The handle is gone either way; the caller cannot read a message from it.
		}
	}
	if h.err != nil {
		C.free(unsafe.Pointer(h.err))
	}
	if h.name != nil {
		C.free(unsafe.Pointer(h.name))
	}
	C.free(unsafe.Pointer(h))
	return rc
}

// cWorld is the caller's coredag_world, called through coredag.c's trampolines. w points into
// the coredag_coll's C memory.
type cWorld struct {
	w *C.coredag_world
}

func (w cWorld) Rank() int { return int(w.w.rank) }
func (w cWorld) Size() int { return int(w.w.size) }

func (w cWorld) Allgather(_ context.Context, send, recv []byte) error {
	if len(recv) != len(send)*w.Size() {
		return fmt.Errorf("world allgather: %d bytes to receive for %d sent by %d ranks", len(recv), len(send), w.Size())
	}
	if len(send) == 0 {
		return nil
	}
	// Go memory passed for the duration of the call only, holding no Go pointers.
	rc := C.cdg_world_allgather(w.w, unsafe.Pointer(&send[0]), unsafe.Pointer(&recv[0]), C.size_t(len(send)))
	if rc != 0 {
		return fmt.Errorf("the world's allgather callback returned %d on rank %d", rc, w.Rank())
	}
	return nil
}

func (w cWorld) Barrier(context.Context) error {
	if rc := C.cdg_world_barrier(w.w); rc != 0 {
		return fmt.Errorf("the world's barrier callback returned %d on rank %d", rc, w.Rank())
	}
	return nil
}

// ownWorld is coredag's world for a NULL coredag_world: the bootstrap when a launcher set this
// process's rank and size, else nil (every rank in this process). close ends the bootstrap.
func ownWorld(ctx context.Context) (coredag.World, func() error, error) {
	if !bootstrap.Launched(nil) {
		return nil, nil, nil // no launcher: every rank here
	}
	w, err := bootstrap.FromLauncher(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("coredag_coll_init: a NULL world takes this process's rank and size from the launcher's environment: %v", err)
	}
	if w.Size == 1 && os.Getenv("COREDAG_BOOTSTRAP") == "" {
		return nil, nil, nil // one process: every rank here
	}
	addr := os.Getenv("COREDAG_BOOTSTRAP")
	if w.Size > 1 && addr == "" {
		return nil, nil, fmt.Errorf("coredag_coll_init: a NULL world under a launcher (%s: rank %d of %d) needs COREDAG_BOOTSTRAP=HOST:PORT (rank 0's host and a free TCP port) in every rank's environment, or pass a coredag_world", w.Source, w.Rank, w.Size)
	}
	bw, err := coredag.BootstrapWorld(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	closer := func() error { return nil }
	if c, ok := bw.(interface{ Close() error }); ok {
		closer = c.Close
	}
	return bw, closer, nil
}

func newCollHandle() *C.struct_coredag_coll {
	h := (*C.struct_coredag_coll)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_coredag_coll{}))))
	if h != nil {
		h.world.rank = -1
	}
	return h
}

//export cdgo_coll_init
func cdgo_coll_init(ph *C.struct_coredag_plan, world *C.coredag_world, out **C.struct_coredag_coll) (rc C.int) {
	if out == nil {
		return codeArg
	}
	h := newCollHandle()
	*out = h
	if h == nil {
		return codeInternal
	}
	defer recoverInto(&rc, &h.err, "coredag_coll_init")
	if ph == nil {
		return fail(&h.err, codeArg, errors.New("coredag_coll_init: the plan is NULL"))
	}
	p, rc := planOf(ph)
	if p == nil {
		return fail(&h.err, rc, fmt.Errorf("coredag_coll_init: the plan did not open: %s", goString(ph.err)))
	}
	ctx := context.Background()
	c := &coll{plan: p}
	var w coredag.World
	if world != nil {
		switch {
		case world.allgather == nil || world.barrier == nil:
			return fail(&h.err, codeArg, errors.New("coredag_coll_init: the world's allgather or barrier callback is NULL"))
		case world.size < 1 || world.rank < 0 || world.rank >= world.size:
			return fail(&h.err, codeArg, fmt.Errorf("coredag_coll_init: the world's rank %d of size %d is not a position (need 0 <= rank < size)", world.rank, world.size))
		}
		h.world = *world
		w = cWorld{&h.world}
	} else {
		var err error
		w, c.closer, err = ownWorld(ctx)
		if err != nil {
			return fail(&h.err, codeWorld, err)
		}
	}
	cc, err := p.p.Init(ctx, w)
	if err != nil {
		if c.closer != nil {
			c.closer()
		}
		return fail(&h.err, codeOf(err), err)
	}
	c.c = cc
	p.colls.Add(1)
	h.handle = C.uintptr_t(cgo.NewHandle(c))
	return codeOK
}

// collOf returns the collective behind h, or an error code for a NULL or failed handle.
func collOf(h *C.struct_coredag_coll) (*coll, C.int) {
	if h == nil {
		return nil, codeArg
	}
	if h.handle == 0 {
		return nil, codeState // the handle's message stays the reason it did not initialize
	}
	return cgo.Handle(h.handle).Value().(*coll), codeOK
}

//export cdgo_coll_bind
func cdgo_coll_bind(h *C.struct_coredag_coll, own C.int, rank C.int, buffer *C.char, addr unsafe.Pointer, nbytes C.size_t) (rc C.int) {
	if h == nil {
		return codeArg
	}
	defer recoverInto(&rc, &h.err, "coredag_coll_bind")
	c, rc := collOf(h)
	if c == nil {
		return rc
	}
	if buffer == nil || addr == nil {
		return fail(&h.err, codeArg, errors.New("coredag_coll_bind: buffer or addr is NULL"))
	}
	if uint64(nbytes) > 1<<62 || uintptr(addr)+uintptr(nbytes) < uintptr(addr) {
		return fail(&h.err, codeArg, fmt.Errorf("coredag_coll_bind: %d bytes at %p are not memory: they pass the end of the address space", uint64(nbytes), addr))
	}
	var err error
	if own != 0 {
		err = c.c.BindPointer(C.GoString(buffer), addr, int(nbytes))
	} else {
		err = c.c.BindRank(int(rank), C.GoString(buffer), unsafe.Slice((*byte)(addr), int(nbytes)))
	}
	if err != nil {
		return fail(&h.err, codeOf(err), err)
	}
	return codeOK
}

//export cdgo_coll_start
func cdgo_coll_start(h *C.struct_coredag_coll) (rc C.int) {
	if h == nil {
		return codeArg
	}
	defer recoverInto(&rc, &h.err, "coredag_coll_start")
	c, rc := collOf(h)
	if c == nil {
		return rc
	}
	if err := c.c.Start(); err != nil {
		return fail(&h.err, codeOf(err), err)
	}
	c.inFlight = true
	return codeOK
}

//export cdgo_coll_test
func cdgo_coll_test(h *C.struct_coredag_coll, done *C.int) (rc C.int) {
	if h == nil {
		return codeArg
	}
	defer recoverInto(&rc, &h.err, "coredag_coll_test")
	c, rc := collOf(h)
	if c == nil {
		return rc
	}
	if done == nil {
		return fail(&h.err, codeArg, errors.New("coredag_coll_test: done is NULL"))
	}
	ok, err := c.c.Test()
	if ok || err != nil {
		c.inFlight = false
	}
	if ok {
		*done = 1
	} else {
		*done = 0
	}
	if err != nil {
		return fail(&h.err, codeOf(err), err)
	}
	return codeOK
}

//export cdgo_coll_wait
func cdgo_coll_wait(h *C.struct_coredag_coll, timeoutNS C.longlong) (rc C.int) {
	if h == nil {
		return codeArg
	}
	defer recoverInto(&rc, &h.err, "coredag_coll_wait")
	c, rc := collOf(h)
	if c == nil {
		return rc
	}
	var err error
	if timeoutNS < 0 {
		err = c.c.Wait(context.Background())
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeoutNS))
		err = c.c.Wait(ctx)
		cancel()
		if errors.Is(err, coredag.ErrBusy) {
			// Wait gave up at the deadline; the start may have ended since: Test tells.
			done, terr := c.c.Test()
			if !done && terr == nil {
				return fail(&h.err, codeTimeout, fmt.Errorf("coredag_coll_wait: not done after %v: the start is still in flight (wait again, or test)", time.Duration(timeoutNS)))
			}
			err = terr
		}
	}
	c.inFlight = false
	if err != nil {
		return fail(&h.err, codeOf(err), err)
	}
	return codeOK
}

//export cdgo_coll_free
func cdgo_coll_free(h *C.struct_coredag_coll) (rc C.int) {
	if h == nil {
		return codeOK
	}
	defer recoverInto(&rc, &h.err, "coredag_coll_free")
	if h.handle != 0 {
		c := cgo.Handle(h.handle).Value().(*coll)
		if c.inFlight {
			return fail(&h.err, codeState, errors.New("coredag_coll_free: a start is in flight: wait for it (coredag_coll_wait) before freeing; the memory bound to the collective is coredag's until then"))
		}
		err := c.c.Close()
		if c.closer != nil {
			if cerr := c.closer(); err == nil {
				err = cerr
			}
		}
		c.plan.colls.Add(-1)
		cgo.Handle(h.handle).Delete()
		h.handle = 0
		if err != nil {
			// The collective is closed; the handle stays to carry the message, and the next
			// coredag_coll_free frees it.
			return fail(&h.err, codeOf(err), err)
		}
	}
	if h.err != nil {
		C.free(unsafe.Pointer(h.err))
	}
	C.free(unsafe.Pointer(h))
	return rc
}
