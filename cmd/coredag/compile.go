package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/atomicfile"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/listing"
	"github.com/coredag/coredag/planner/replay"
)

func init() {
	register("compile", "Compile a plan into per-queue WQE chains (WAIT/ENABLE, fences, signalling) and list them.", func() any { return &compileCmd{} })
}

type compileCmd struct {
	paramFlags
	Target string `default:"connectx" help:"Target to compile for (see coredag targets)."`
	Rank   []int  `help:"List only these ranks (repeatable, or a comma-separated list; default: all), as dot --rank draws only them."`
	Format string `default:"text" enum:"text,json" help:"Listing format: text or json (docs/compile-json.md)."`
	Out    string `short:"o" placeholder:"FILE" help:"Write the listing to FILE instead of stdout."`
	Replay string `default:"auto" enum:"auto,on,off" help:"Replay the compiled chains on the NIC model before the listing is closed: on, off, or auto (plans of at most 1M ops; past that the replay costs about twice compile's time and three times its memory)."`
	File   string `arg:"" name:"file" help:"Plan file (- for stdin)."`

	// mangle, set by tests only, changes the compiled Plan before its replay, as a bug in the
	// lowering would.
	mangle func(*ir.Plan) `kong:"-"`
	// partly says what of the replay was left out, for Run to print ("" when nothing).
	partly string
}

func (c *compileCmd) Run(e *env) error {
	t, err := ir.LookupTarget(c.Target)
	if err != nil {
		return usageError("%v", err)
	}
	// The lowering begins beside the checks. Listing to stdout, a target limit must be found
	// before the first rank is written: CheckLimits runs there first. A file is written beside
	// the checks too, and kept only if they pass (see toFile).
	opt := loadOptions{target: &t, lower: true, limits: c.Out == "" && t.Trigger == nil}
	var file *fileListing
	if c.Out != "" {
		if err := checkOutput(e, "-o", c.Out, c.File); err != nil {
			return err
		}
		opt.then = func(ctx context.Context, l *loaded) { file = c.toFile(ctx, l) } // ctx: stopped by the checks or a signal
	}
	l, err := mustLoad(e, c.File, c.paramFlags, c.Format == "json", opt)
	for _, r := range c.Rank {
		if err == nil && (r < 0 || r >= l.graph.Ranks) {
			err = usageError("--rank %d: plan %s has ranks 0..%d", r, l.graph.Name, l.graph.Ranks-1)
		}
	}
	switch {
	case err != nil && file != nil && file.f != nil && errors.Is(err, context.Canceled):
		file.abort() // interrupted while the listing was written: say that -o was left alone
		return notWritten("the listing", file.path, err)
	case err != nil:
		file.abort()
		return err
	case c.Out == "":
		err = c.toStdout(e, l)
	default:
		err = file.commit(e, l, c.Format == "json") // loadPlan ran then: the plan passed its checks
	}
	if c.partly != "" {
		fmt.Fprintf(e.stderr, "%s: note: %s\n", l.path, c.partly)
	}
	return err
}

// list lowers and lists the plan a rank at a time (l.lowering, begun by loadPlan) to w: ranks
// are lowered and rendered on every CPU, and written in order, until ctx is cancelled. A target
// limit broken on a later rank is found only after the earlier ranks are listed (on a
// triggered target CompileEach builds the Plan whole before listing it). The Plan, kept whole,
// is then replayed on the NIC model (replayChains) before the listing is closed. The lowering's
// own error (diagnostics, the replay's included) comes apart from w's, and so does ctx's cause,
// once ctx stops the lowering or the replay.
func (c *compileCmd) list(ctx context.Context, w io.Writer, l *loaded) (compileErr, err error) {
	defer func() {
		if cause := stop.Stopped(ctx, cmp.Or(compileErr, err)); cause != nil {
			compileErr, err = nil, cause
		}
	}()
	opt := listing.Options{Ranks: c.Rank}
	lw := listing.NewWriter(w, opt)
	if c.Format == "json" {
		lw = listing.NewJSONWriter(w, opt)
	}
	var writeErr error
	replayIt := c.Replay == "on" || c.Replay == "auto" && len(l.graph.Ops) <= maxAutoReplayOps
	if replayIt {
		l.lowering.KeepRanks() // the replay reads the whole Plan
	} else if c.Replay == "auto" {
		c.partly = fmt.Sprintf("the compiled chains were not replayed on the NIC model: the plan's %d ops are more than the %d that --replay auto replays (--replay on does, at about twice the time and three times the memory)", len(l.graph.Ops), maxAutoReplayOps)
	}
	p, err := l.lowering.CompileEach(ctx, func(p *ir.Plan, r int) func() error {
		b := lw.Render(p, r)
		return func() error {
			if writeErr = stop.Cause(ctx); writeErr == nil {
				writeErr = lw.Emit(p, b)
			}
			return writeErr
		}
	})
	switch {
	case err != nil && err != writeErr:
		return err, nil
	case err != nil:
		return nil, err
	}
	if c.mangle != nil {
		c.mangle(p)
	}
	if !replayIt {
		return nil, lw.Close(p)
	}
	if n := replay.TriggeredWork(p); n > maxTriggeredProof {
		c.partly = fmt.Sprintf("the replay did not prove the triggered work from its counters: a rank has %d entries, above the %d it proves in reasonable time (shape and progress were replayed)", n, maxTriggeredProof)
	}
	if err := replayChains(ctx, p); err != nil {
		return err, nil
	}
	return nil, lw.Close(p)
}

// maxAutoReplayOps is the largest plan --replay auto replays. The replay keeps the compiled Plan
// whole, where the listing alone holds a few ranks: the ring allreduce at 1024 ranks (5.2M ops)
// took 26 s and 3.8 GB to compile with it, 7 s and 1.4 GB without.
const maxAutoReplayOps = 1 << 20

// maxTriggeredProof is the most triggered work entries of a rank whose triggered proof compile
// runs (replay.Options.TriggeredWork): the proof costs about the cube of them (ring allreduce
// at 48 ranks, some 700 entries a rank, takes about 60 ms a rank on one core).
const maxTriggeredProof = 512

// replayChains checks every chain of a compiled Plan on the NIC model (planner/replay): shape,
// enforcement of every edge, and progress over iterations re-armed across the index wraps. A
// failure is coredag's own bug, reported as internal errors at the op, each naming the chain
// entries (rank, work queue, index) concerned. Once ctx is cancelled, the error is its cause.
func replayChains(ctx context.Context, p *ir.Plan) error {
	err := replay.Check(ctx, p, replay.Options{TriggeredWork: maxTriggeredProof})
	var list diag.List
	if err == nil || !errors.As(err, &list) {
		return err
	}
	out := make(diag.List, len(list))
	for i, d := range list {
		x := *d
		x.Code = diag.Internal
		x.Msg = "internal error: the compiled chains fail their replay on the NIC model (a bug in coredag, please report it): " + d.Msg
		out[i] = &x
	}
	return out
}

// toStdout lists a plan that passed its checks on stdout, once CheckLimits has found no
// target limit broken.
func (c *compileCmd) toStdout(e *env, l *loaded) error {
	asJSON := c.Format == "json"
	if err := l.limits; err != nil {
		return failPlan(e, l, err, asJSON)
	}
	compileErr, err := c.list(e.ctx, e.stdout, l)
	if compileErr != nil {
		return failPlan(e, l, compileErr, asJSON)
	}
	return err
}

// fileListing is -o's listing, written to its temporary file (atomicfile) beside the checks.
type fileListing struct {
	path       string
	f          *atomicfile.File // nil if it could not be created
	compileErr error            // the lowering's diagnostics
	err        error            // the file's
}

// toFile writes the listing to a temporary file beside -o's, for commit to keep or not.
func (c *compileCmd) toFile(ctx context.Context, l *loaded) *fileListing {
	f, err := atomicfile.Create(c.Out)
	fl := &fileListing{path: c.Out, f: f, err: err}
	if err != nil {
		return fl
	}
	fl.compileErr, fl.err = c.list(ctx, f, l)
	return fl
}

// abort drops the listing written so far, if any.
func (fl *fileListing) abort() {
	if fl != nil && fl.f != nil {
		fl.f.Abort()
	}
}

// commit keeps the listing of a plan that passed its checks: its file replaces -o's, unless
// the lowering or the writing failed, which leaves -o as it was.
func (fl *fileListing) commit(e *env, l *loaded, asJSON bool) error {
	err := fl.err
	if err == nil && fl.compileErr == nil {
		err = fl.f.Commit()
	}
	fl.abort() // nothing after Commit
	if fl.compileErr != nil {
		return failPlan(e, l, fl.compileErr, asJSON)
	}
	if err != nil {
		return notWritten("the listing", fl.path, err)
	}
	return nil
}
