package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/atomicfile"
	"github.com/coredag/coredag/planner"
)

func init() {
	register("fmt", "Format plans canonically (like gofmt); stdin to stdout when no file is given.", func() any { return &fmtCmd{} })
}

type fmtCmd struct {
	List  bool     `short:"l" help:"List files whose formatting differs from coredag's."`
	Write bool     `short:"w" help:"Write the result to the file instead of stdout."`
	Diff  bool     `short:"d" help:"Print a unified diff instead of the formatted text."`
	Paths []string `arg:"" optional:"" name:"path" help:"Plan files, or directories to search for .dag files; - for stdin."`
}

func (c *fmtCmd) Run(e *env) error {
	if len(c.Paths) == 0 {
		if c.Write {
			return usageError("fmt -w needs files to write")
		}
		src, err := readSource(e, "-")
		if err != nil {
			return err
		}
		return c.file(e, "<stdin>", src, true)
	}
	if slices.Contains(c.Paths, "-") {
		switch {
		case c.Write || c.List:
			return usageError("fmt: - (stdin) goes to stdout: it takes neither -w nor -l")
		case len(c.Paths) > 1:
			return usageError("fmt: - (stdin) must be the only path")
		}
		src, err := readSource(e, "-")
		if err != nil {
			return usageError("%v", err)
		}
		return c.file(e, "<stdin>", src, true)
	}
	for _, p := range c.Paths {
		if err := notMSCCL(p); err != nil {
			return err
		}
	}
	failed := false
	for _, p := range c.Paths {
		files, err := dagFiles(p)
		if err != nil {
			return usageError("%v", err)
		}
		for _, f := range files {
			src, err := readSource(e, f)
			if err != nil {
				return err
			}
			if err := c.file(e, f, src, false); err != nil {
				if _, ok := err.(*exitError); !ok {
					return err
				}
				failed = true
			}
		}
	}
	if failed {
		return &exitError{code: exitFail}
	}
	return nil
}

// file formats one source; a file with syntax errors is reported and left untouched.
func (c *fmtCmd) file(e *env, name string, src []byte, stdin bool) error {
	f, err := dsl.Parse(name, src)
	if err != nil {
		diag.Print(e.stderr, err, diag.Sources{name: src})
		return &exitError{code: exitFail}
	}
	out := dsl.Format(f)
	changed := !bytes.Equal(src, out)
	if c.List && changed {
		fmt.Fprintln(e.stdout, name)
	}
	if c.Write && changed {
		if err := atomicfile.WriteFile(name, out); err != nil {
			return fmt.Errorf("fmt -w: %w (%s left as it was)", err, name)
		}
	}
	if c.Diff && changed {
		e.stdout.Write(unifiedDiff(name, src, out))
	}
	if !c.List && !c.Write && !c.Diff {
		e.stdout.Write(out)
	}
	return nil
}

// notMSCCL refuses an MSCCL-IR .xml algorithm, which every other command reads as a plan but
// fmt would parse as .dag text, reporting a screen of syntax errors; import msccl converts it.
func notMSCCL(path string) error {
	if !planner.IsMSCCL(path) {
		return nil
	}
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return nil // a directory stands for the .dag files under it
	}
	dag := strings.TrimSuffix(path, filepath.Ext(path)) + ".dag"
	return usageError("fmt formats .dag plans, and %s is an MSCCL-IR .xml algorithm: to get a formatted .dag plan from it, run coredag import msccl %s -o %s", path, path, dag)
}

// dagFiles expands a path: a file stands for itself, a directory for the .dag files under it.
func dagFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".dag") {
			files = append(files, p)
		}
		return nil
	})
	return files, err
}
