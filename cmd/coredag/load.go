package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/planner"
)

// paramFlags is the -p NAME=VALUE flag every command that reads a plan takes.
type paramFlags struct {
	Params []string `short:"p" name:"param" sep:"none" placeholder:"NAME=VALUE" help:"Set a declared param, e.g. -p ranks=8 (repeatable; values take 0x, _ and KiB/MiB/GiB)."`
}

// values parses the -p flags.
func (p paramFlags) values() (map[string]int64, error) {
	out := make(map[string]int64, len(p.Params))
	for _, kv := range p.Params {
		name, val, ok := strings.Cut(kv, "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || name == "" || val == "" {
			return nil, usageError("-p %q: want NAME=VALUE, e.g. -p ranks=8", kv)
		}
		v, err := parseInt(val)
		if err != nil {
			return nil, usageError("-p %s: %v", kv, err)
		}
		out[name] = v
	}
	return out, nil
}

// parseInt reads an integer as the language writes it: 42, 0x2a, 1_000, 4KiB.
func parseInt(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	if v != 0 && (v*mult/mult != v) {
		return 0, fmt.Errorf("%s overflows 64 bits", s)
	}
	return v * mult, nil
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

// loadPlan loads one plan; an unreadable file or bad flag is a usage error (exit 2).
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
	return &loaded{path: name, src: src, graph: g, err: err}, nil
}

// mustLoad loads a plan and, when it has diagnostics, prints them and ends with exit 1.
func mustLoad(e *env, path string, p paramFlags) (*loaded, error) {
	l, err := loadPlan(e, path, p)
	if err != nil {
		return nil, err
	}
	if l.err != nil {
		printDiagnostics(e.stderr, l)
		return nil, &exitError{code: exitFail}
	}
	return l, nil
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

func diagnosticsJSON(err error) []jsonDiagnostic {
	var list dsl.ErrorList
	if !errors.As(err, &list) {
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
