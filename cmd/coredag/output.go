package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/coredag/coredag/internal/atomicfile"
)

// Every file coredag writes goes through internal/atomicfile: a failed write leaves the old file
// as it was. A command checks its output paths with checkOutput before its work.

// checkOutput reports, as a usage error, an output path (the value of flag) that cannot be
// written: its directory is missing, it is a directory, it may not be written, or it is one of
// the command's input files (also through a link, or as the file on stdin for "-").
func checkOutput(e *env, flag, out string, inputs ...string) error {
	if err := atomicfile.Check(out); err != nil {
		return usageError("%s %v", flag, err)
	}
	oi, err := os.Stat(out)
	if err != nil || !oi.Mode().IsRegular() { // nothing yet, or a device such as /dev/null
		return nil
	}
	for _, in := range inputs {
		var ii os.FileInfo
		if in == "" { // an optional input not given
			continue
		}
		if in != "-" {
			ii, err = os.Stat(in)
		} else if f, ok := e.stdin.(*os.File); ok {
			ii, err = f.Stat()
			in = "the standard input"
		} else {
			continue
		}
		if err == nil && os.SameFile(oi, ii) {
			return usageError("%s %s: is the same file as the input, %s", flag, out, in)
		}
	}
	return nil
}

// writeOutput writes data, a command's result described by what, to path; the error says that
// the file is as it was.
func writeOutput(path, what string, data []byte) error {
	if err := atomicfile.WriteFile(path, data); err != nil {
		return notWritten(what, path, err)
	}
	return nil
}

// notWritten is the error of an output file that could not be written.
func notWritten(what, path string, err error) error {
	return fmt.Errorf("writing %s: %w (%s left as it was)", what, err, path)
}

// checkOutputs checks run's output files up front; timeline is --timeline's path for this
// process (see timelinePath).
func (c *runCmd) checkOutputs(e *env, timeline string) error {
	if c.OnHang != "" {
		if err := checkOutput(e, "--on-hang", c.OnHang, c.File); err != nil {
			return err
		}
	}
	if timeline == "" {
		return nil
	}
	if err := checkOutput(e, "--timeline", timeline, c.File); err != nil {
		return err
	}
	if c.OnHang != "" && sameOutput(c.OnHang, timeline) {
		return usageError("--on-hang and --timeline both write %s", timeline)
	}
	return nil
}

// sameOutput reports whether two output paths name the same file, existing or not.
func sameOutput(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ai, aerr := os.Stat(a)
	bi, berr := os.Stat(b)
	return aerr == nil && berr == nil && os.SameFile(ai, bi)
}

// timelinePath is where --timeline goes for one rank of size processes: with several, each
// writes FILE with .rankR before the extension.
func (c *runCmd) timelinePath(rank, size int) string {
	path := c.Timeline
	if path == "" || size <= 1 {
		return path
	}
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s.rank%d%s", strings.TrimSuffix(path, ext), rank, ext)
}
