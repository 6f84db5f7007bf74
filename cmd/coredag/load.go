package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/planner"
)

// paramFlags is the -p NAME=VALUE flag every command that reads a plan takes.
type paramFlags struct {
	Params []string `short:"p" name:"param" sep:"none" placeholder:"NAME=VALUE" help:"Set a declared param, e.g. -p ranks=8 (repeatable; values take 0x, _ and KiB/MiB/GiB)."`
}

// values parses the -p flags.
func (p paramFlags) values() (map[string]int64, error) {
	v, err := planner.ParseParams(p.Params)
	if err != nil {
		return nil, usageError("-p %v", err)
	}
	return v, nil
}

// loaded is one plan file read, parsed, elaborated and checked.
type loaded struct {
	path  string
	src   []byte
	graph *planner.Graph
	err   error // diagnostics (a dsl.ErrorList) or another error
}

// readSource reads a plan file, or stdin for "-".
func readSource(e *env, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(e.stdin)
	}
	return os.ReadFile(path)
}

// loadPlan loads one plan; an unreadable file or bad flag (-p naming a param the plan does
// not declare, too) is a usage error (exit 2).
func loadPlan(e *env, path string, p paramFlags) (*loaded, error) {
	params, err := p.values()
	if err != nil {
		return nil, err
	}
	src, err := readSource(e, path)
	if err != nil {
		return nil, usageError("%v", err)
	}
	name := path
	if path == "-" {
		name = "<stdin>"
	}
	g, err := planner.Load(name, src, params)
	var pe *planner.ParamError
	if errors.As(err, &pe) {
		return nil, usageError("%s: %v", dsl.QuoteName(name), pe)
	}
	return &loaded{path: name, src: src, graph: g, err: err}, nil
}

// mustLoad loads a plan and, when it has diagnostics, reports them and ends with exit 1: as
// text on stderr, or with asJSON as the object `check --json` prints for one file, on stdout.
func mustLoad(e *env, path string, p paramFlags, asJSON bool) (*loaded, error) {
	l, err := loadPlan(e, path, p)
	if err != nil {
		return nil, err
	}
	if l.err != nil {
		reportDiagnostics(e, l, asJSON)
		return nil, &exitError{code: exitFail}
	}
	return l, nil
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
	dsl.PrintError(w, l.err, dsl.Sources{l.path: l.src})
}

// jsonDiagnostic is one diagnostic in `--json` output, for editors and other tools.
type jsonDiagnostic struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Message string `json:"message"`
}

// diagnosticsJSON lists err's diagnostics, each with its position: an ErrorList, one
// diagnostic, or a runtime fault of an op (a failure before the run, in the reference).
func diagnosticsJSON(err error) []jsonDiagnostic {
	var (
		list dsl.ErrorList
		one  *dsl.Error
		op   *exec.OpError
	)
	switch {
	case errors.As(err, &list):
	case errors.As(err, &one):
		list = dsl.ErrorList{one}
	case errors.As(err, &op):
		msg := strings.TrimPrefix(op.Error(), op.Pos.String()+": ")
		list = dsl.ErrorList{{Pos: op.Pos, Msg: msg}}
	default:
		return []jsonDiagnostic{{Message: err.Error()}}
	}
	out := make([]jsonDiagnostic, len(list))
	for i, d := range list {
		out[i] = jsonDiagnostic{File: d.Pos.File, Line: d.Pos.Line, Col: d.Pos.Col, Message: d.Msg}
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
