package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/msccl"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/planset"
)

// paramFlags is the -p NAME=VALUE flag every command that reads a plan takes, and --mem, the
// memory budget that bounds what the command may allocate for it.
type paramFlags struct {
	Params []string `short:"p" name:"param" sep:"none" placeholder:"NAME=VALUE" help:"Set a declared param, e.g. -p ranks=8 (repeatable; values take 0x, _ and KiB/MiB/GiB/TiB)."`
	Mem    string   `placeholder:"SIZE" help:"Memory budget, e.g. 8GiB: a plan or run that would need more is refused up front (default: COREDAG_MEM, else 80% of the memory available to the process)."`
	Type   string   `name:"msccl-type" default:"f32" placeholder:"TYPE" help:"Element type of the buffers of an MSCCL .xml algorithm (u8 i32 u32 i64 u64 f32 f64)."`
}

// budget resolves --mem, COREDAG_MEM or the machine's figure.
func (p paramFlags) budget() (budget.Budget, error) {
	b, err := budget.Resolve(budget.Flag, p.Mem, os.Getenv)
	if err != nil {
		return b, usageError("%v", err)
	}
	return b, nil
}

// values parses the -p flags.
func (p paramFlags) values() (map[string]int64, error) {
	v, err := elaborate.ParseParams(p.Params)
	if err != nil {
		return nil, usageError("-p %v", err)
	}
	return v, nil
}

// loaded is one plan file read, parsed, elaborated and checked.
type loaded struct {
	path     string
	src      []byte
	graph    *ir.Graph
	err      error           // diagnostics (a diag.List) or another error
	budget   budget.Budget   // the memory budget the plan was loaded within
	lints    diag.List       // the lints' warnings, when asked for and the plan passed
	limits   error           // lower.CheckLimits' verdict, when asked for and the plan passed
	lowering *lower.Prepared // its lowering begun, when asked for and the plan passed
}

// readSource reads a plan file, or stdin for "-", refusing one larger than dsl.MaxSource (whatever
// it is: a device such as /dev/zero never ends) and a plan set (a .set name, or text that
// begins as a set does: planset.IsSet), which is no plan. Errors are usage errors (exit 2).
func readSource(e *env, path string) ([]byte, error) {
	r, name := e.stdin, "<stdin>"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, usageError("%v", err)
		}
		defer f.Close()
		r, name = f, path
	}
	src, err := dsl.ReadSource(r, name)
	if err != nil {
		return nil, usageError("%v", err)
	}
	if planset.IsSet(path, src) {
		file, save := path, ""
		if path == "-" {
			file, save = "FILE", "save it to a file; "
		}
		return nil, usageError("%s is a plan set, not a plan: %s`coredag select %s --size SIZE -p ranks=R` names the plan it runs at a message size (then give that plan here), `coredag check %s` checks the set", name, save, file, file)
	}
	return src, nil
}

// isSetFile reports whether check reads path as a plan set: a .set file, or a file whose first
// statement is a set's (planset.IsSet), whatever its name.
func isSetFile(path string) bool {
	if path == "-" {
		return false
	}
	var head []byte
	if f, err := os.Open(path); err == nil { // else the loader says why
		head, _ = io.ReadAll(io.LimitReader(f, 64<<10))
		f.Close()
	}
	return planset.IsSet(path, head)
}

// loadOptions is what a command asks of loadPlan beyond its flags.
type loadOptions struct {
	lint   bool       // run the lints (planner.Options.Lint): l.lints
	target *ir.Target // the target of lower and limits
	lower  bool       // begin lowering for target (lower.PrepareEach): l.lowering
	limits bool       // check target's limits (lower.CheckLimits): l.limits
	// then, with lower, is more work on the begun lowering beside the checks; ctx is cancelled
	// if one of them fails.
	then func(ctx context.Context, l *loaded)
	// order names the target whose ordering between the ops of a queue the races are proven
	// under when target is nil (run: the plan's Graph then says what it relies on); "" or an
	// unknown name: none.
	order string
}

// loadPlan loads one plan, doing what opt asks beside the checks (planner.Options.Beside): a
// plan that fails them waits for that work too. An unreadable file or bad flag (-p naming a
// param the plan does not declare, too) is a usage error (exit 2).
func loadPlan(e *env, path string, p paramFlags, opt loadOptions) (*loaded, error) {
	params, err := p.values()
	if err != nil {
		return nil, err
	}
	if _, ok := ir.ParseElemType(p.Type); !ok && p.Type != "" { // read for .xml files only: check it for every file
		return nil, usageError("--msccl-type %s: want one of u8 i32 u32 i64 u64 f32 f64", p.Type)
	}
	b, err := p.budget()
	if err != nil {
		return nil, err
	}
	if note := b.Note(); note != "" {
		fmt.Fprintf(e.stderr, "coredag: note: %s\n", note)
	}
	src, err := readSource(e, path)
	if err != nil {
		return nil, err
	}
	name := path
	if path == "-" {
		name = "<stdin>"
	}
	l := &loaded{path: name, src: src, budget: b}
	po := planner.Within(b)
	po.MSCCL = msccl.Options{Elem: p.Type}
	if opt.lint {
		po.Lint = func(found diag.List) { l.lints = found }
	}
	if t, err := ir.LookupTarget(opt.order); err == nil && opt.target == nil {
		po.Verify.Order, po.Verify.Target = t.Order, t.Name
	}
	if opt.target != nil {
		po.Verify.Order, po.Verify.Target = opt.target.Order, opt.target.Name
		po.Beside = func(ctx context.Context, g *ir.Graph) {
			l.graph = g // the same Graph Load returns, which waits for Beside
			// ctx ends with a signal or a failed check: the lowering stops, and its result
			// (ctx's cause) goes unused, as the plan's loading fails.
			switch {
			case opt.lower:
				l.lowering = lower.PrepareEach(ctx, g, *opt.target)
				if opt.limits {
					l.limits = l.lowering.CheckLimits(ctx) // on the same event order
				}
				if opt.then != nil {
					opt.then(ctx, l)
				}
			case opt.limits:
				l.limits = lower.CheckLimits(ctx, g, *opt.target)
			}
		}
	}
	l.graph, l.err = planner.Load(e.ctx, name, src, params, po) // a signal stops the plan's evaluation and its checks
	if errors.Is(l.err, context.Canceled) {                     // interrupted: the command stops (runInterruptible)
		return nil, l.err
	}
	var pe *elaborate.ParamError
	if errors.As(l.err, &pe) {
		return nil, usageError("%s: %v", diag.QuoteName(name), pe)
	}
	if err := refusal(name, l.err); err != nil { // an array of the plan's refused
		return nil, err
	}
	return l, nil
}

// refusal returns err, when it is a refusal of the memory budget (a *budget.Error) met in the
// plan file name, as the usage error that ends the command (exit 2): as the refusal words itself
// when it is at a position in the plan, which names the file, else after name; nil when err is
// no refusal.
func refusal(name string, err error) error {
	var be *budget.Error
	if !errors.As(err, &be) {
		return nil
	}
	if be.Pos.IsValid() {
		return usageError("%s", be.Error())
	}
	return usageError("%s: %s", diag.QuoteName(name), be.Message())
}

// inPlan words err, met in the plan file path while doing what (such as "at n = 1"), for the
// command's error line: "path: what: message", or "path:line:col: what: message" when err is a
// diagnostic at a position in the plan, whose message begins with it: the file named once.
func inPlan(path, what string, err error) string {
	msg := headLine(err.Error())
	var d *diag.Diagnostic
	if l := (diag.List)(nil); errors.As(err, &l) && len(l) > 0 {
		d = l[0]
	} else {
		errors.As(err, &d)
	}
	if d != nil && d.Pos.IsValid() && d.Pos.Filename() == path {
		if rest, ok := strings.CutPrefix(msg, d.Pos.String()+": "); ok {
			return d.Pos.String() + ": " + what + ": " + rest
		}
	}
	return diag.QuoteName(path) + ": " + what + ": " + msg
}

// refuse reports a *budget.Error: positioned (with the source line) when the figure comes from
// the plan, and ends the command with exit 2, as for a flag the machine cannot honour.
func refuse(e *env, l *loaded, err error) error {
	var be *budget.Error
	if !errors.As(err, &be) {
		return err
	}
	if !be.Pos.IsValid() {
		return usageError("%s: %s", l.path, be.Message())
	}
	diag.Print(e.stderr, &diag.Diagnostic{Code: diag.Limit, Pos: be.Pos, Msg: be.Message()}, diag.Sources{l.path: l.src})
	return &exitError{code: exitUsage}
}

// mustLoad loads a plan and, when it has diagnostics, reports them and ends with exit 1: as
// text on stderr, or with asJSON as the object `check --json` prints for one file, on stdout.
func mustLoad(e *env, path string, p paramFlags, asJSON bool, opt loadOptions) (*loaded, error) {
	l, err := loadPlan(e, path, p, opt)
	if err != nil {
		return nil, err
	}
	if l.err != nil {
		reportDiagnostics(e, l, asJSON)
		return nil, &exitError{code: exitFail}
	}
	return l, nil
}

// failPlan reports err, the diagnostics of a plan found past its loading (a target limit, the
// reference run), as reportDiagnostics does, and ends the command with exit 1.
func failPlan(e *env, l *loaded, err error, asJSON bool) error {
	l.err = err
	reportDiagnostics(e, l, asJSON)
	return &exitError{code: exitFail}
}

// reportDiagnostics prints a plan's diagnostics as text on stderr or as JSON on stdout.
func reportDiagnostics(e *env, l *loaded, asJSON bool) {
	if asJSON {
		_ = writeJSON(e.stdout, checkReport{File: l.path, Diagnostics: diagnosticsJSON(l.err)})
		return
	}
	printDiagnostics(e.stderr, l)
}

// printDiagnostics prints a plan's diagnostics as file:line:col: message, with the source
// line and a caret.
func printDiagnostics(w io.Writer, l *loaded) {
	diag.Print(w, l.err, diag.Sources{l.path: l.src})
}

// diagnosticsJSON lists err's diagnostics in their --json form (docs/check-json.md), each with
// its code and position: a diag.List, one diagnostic, or a runtime fault of an op (a failure
// before the run, in the reference). Any other error is one entry with code fault and no
// position.
func diagnosticsJSON(err error) []diag.JSON {
	var (
		list diag.List
		one  *diag.Diagnostic
		op   *exec.OpError
	)
	switch {
	case errors.As(err, &list):
	case errors.As(err, &one):
		list = diag.List{one}
	case errors.As(err, &op):
		list = diag.List{opDiagnostic(op)}
	default:
		return []diag.JSON{{Code: diag.Fault, Message: err.Error()}}
	}
	return list.ToJSON()
}

// opDiagnostic words a runtime fault of an op as a diagnostic at the op.
func opDiagnostic(op *exec.OpError) *diag.Diagnostic {
	return &diag.Diagnostic{Code: diag.Fault, Pos: op.Pos, Msg: strings.TrimPrefix(op.Error(), op.Pos.String()+": ")}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
