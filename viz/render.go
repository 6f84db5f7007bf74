package viz

// Rendering runs the system Graphviz's dot program as a child process, the way `go tool pprof
// -svg` does: DOT text on its stdin, the drawing read back from its stdout.
//
// coredag used to link github.com/goccy/go-graphviz (v0.2.10), which runs Graphviz compiled to
// WebAssembly in process. It is not linked any more, because of what that package does by
// itself:
//
//   - it compiles its ~6 MB WebAssembly module with wazero in a package init function, so every
//     program that links it pays for the compile (0.6-0.7 s with an empty cache) and its memory at
//     start-up, whether or not it ever draws anything, and no caller can opt out;
//   - it keeps wazero's compilation cache, native code it later maps and executes, in
//     os.TempDir()/go-graphviz, created with mode 0755 and shared by every user of the machine:
//     a second user cannot use it at all, and a user who creates the directory first can plant
//     code that other users' programs then run;
//   - it panics in that init when anything goes wrong (cache not writable, address space
//     limited by ulimit -v), instead of returning an error a caller could report.
//
// A subprocess has none of these problems: nothing starts until something is drawn, the program
// comes from the user's own PATH (or COREDAG_DOT), a missing or failing dot is an ordinary error,
// and a runaway layout can be killed.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/emicklei/dot"
)

// Format is an output format of Render.
type Format string

// Output formats.
const (
	DOT Format = "dot" // DOT text as built, no layout
	SVG Format = "svg"
	PNG Format = "png"
)

// FormatForFile picks the format from a file name's extension (.dot, .gv, .svg, .png).
func FormatForFile(name string) (Format, error) {
	switch ext := strings.ToLower(filepath.Ext(name)); ext {
	case ".dot", ".gv":
		return DOT, nil
	case ".svg":
		return SVG, nil
	case ".png":
		return PNG, nil
	default:
		return "", fmt.Errorf("%s: unknown drawing format %q (use .dot, .svg or .png)", name, ext)
	}
}

// DotEnv names the environment variable that overrides where Graphviz's dot program is found:
// an absolute path to the program. When it is unset or empty, dot is looked up in PATH.
const DotEnv = "COREDAG_DOT"

// DefaultTimeout bounds a layout when Render's context has no deadline of its own.
const DefaultTimeout = 5 * time.Minute

// ErrNoDot is wrapped by the errors DotProgram (and so Render) returns when Graphviz's dot
// program cannot be found or is not usable; the wrapping error says why.
var ErrNoDot = errors.New("Graphviz's dot program")

// ErrTimeout is wrapped by the error Render returns when dot did not finish before the deadline.
var ErrTimeout = errors.New("Graphviz's dot did not finish in time")

// Defaults of RenderOptions.
const (
	DefaultMaxOutput int64 = 256 << 20
	DefaultMaxStderr int64 = 16 << 10
	DefaultWaitDelay       = 2 * time.Second
)

// RenderOptions bound one rendering. The zero value is the defaults.
type RenderOptions struct {
	// Dot is the path of Graphviz's dot program to run, used as given; "" finds it with
	// DotProgram.
	Dot string
	// MaxOutput is the largest drawing accepted, in bytes: dot is stopped as soon as it writes
	// more, and the drawing refused. 0 means DefaultMaxOutput.
	MaxOutput int64
	// MaxStderr is how many bytes of dot's messages an error quotes at most. 0 means
	// DefaultMaxStderr.
	MaxStderr int64
	// WaitDelay is how long to wait for dot's output pipes to close after dot has exited or been
	// killed (a child of dot, say of a wrapper script, may still hold them). 0 means
	// DefaultWaitDelay.
	WaitDelay time.Duration
}

// withDefaults returns o with its zero fields set to the defaults (all but Dot).
func (o RenderOptions) withDefaults() RenderOptions {
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.MaxStderr <= 0 {
		o.MaxStderr = DefaultMaxStderr
	}
	if o.WaitDelay <= 0 {
		o.WaitDelay = DefaultWaitDelay
	}
	return o
}

// noDotHint is how a missing dot program is explained.
const noDotHint = "install Graphviz, e.g. apt-get install graphviz, set " + DotEnv + ", or write .dot"

// DotProgram returns the path of the Graphviz dot program Render runs: $COREDAG_DOT if set
// (which must be an absolute path to an executable file), else dot found in PATH. A program
// found in PATH only relative to the current directory is refused, as exec.LookPath does. The
// error wraps ErrNoDot.
func DotProgram() (string, error) {
	if p := os.Getenv(DotEnv); p != "" {
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("%w: %s=%q is not an absolute path", ErrNoDot, DotEnv, p)
		}
		fi, err := os.Stat(p)
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		switch {
		case err != nil:
			return "", fmt.Errorf("%w: %s=%s: %v", ErrNoDot, DotEnv, p, err)
		case fi.IsDir():
			return "", fmt.Errorf("%w: %s=%s is a directory", ErrNoDot, DotEnv, p)
		case fi.Mode()&0o111 == 0:
			return "", fmt.Errorf("%w: %s=%s is not executable", ErrNoDot, DotEnv, p)
		}
		return p, nil
	}
	p, err := exec.LookPath("dot")
	switch {
	case errors.Is(err, exec.ErrDot):
		return "", fmt.Errorf("%w: PATH finds it only relative to the current directory (%s), which is not used", ErrNoDot, p)
	case err != nil:
		return "", fmt.Errorf("%w: not found in PATH", ErrNoDot)
	}
	return p, nil
}

// Render lays out DOT text with Graphviz's dot program and writes the drawing to w in the given
// format, within DefaultTimeout and the default RenderOptions. DOT is copied through unchanged.
// See RenderContext.
func Render(dotText []byte, format Format, w io.Writer) error {
	return RenderContext(context.Background(), dotText, format, w, RenderOptions{})
}

// RenderContext is Render bounded by ctx and opts; when ctx has no deadline, DefaultTimeout
// applies.
//
// SVG and PNG are made by running Graphviz's dot program (see DotProgram) with the DOT text on its
// stdin. The drawing is collected in memory and written to w only once dot has succeeded, so on
// any error nothing is written. Errors name the cause: no dot program (wrapping ErrNoDot), dot's
// own messages when it fails, the deadline (wrapping ErrTimeout), or an oversized output. When
// dot fails after writing a drawing (edges it could not route), the layout is done again with
// straight edges. It is safe to call from several goroutines: each call runs its own dot.
func RenderContext(ctx context.Context, dotText []byte, format Format, w io.Writer, opts RenderOptions) error {
	switch format {
	case DOT:
		_, err := w.Write(dotText)
		return err
	case SVG, PNG:
	default:
		return fmt.Errorf("viz: unknown format %q (want dot, svg or png)", string(format))
	}
	what := "rendering " + strings.ToUpper(string(format))
	prog := opts.Dot
	if prog == "" {
		var err error
		if prog, err = DotProgram(); err != nil {
			return fmt.Errorf("%s needs %w (%s)", what, err, noDotHint)
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	r := dotRun{prog: prog, what: what, opts: opts.withDefaults()}
	// -Tpng picks Graphviz's best PNG renderer, cairo where installed, which fills and strokes
	// shapes and anti-aliases.
	out, err := r.run(ctx, dotText, "-T"+string(format))
	var routing *dotFailed
	if errors.As(err, &routing) && routing.wrote {
		// dot wrote a drawing but reported errors. Graphviz 2.43 (the release Debian and Ubuntu
		// ship) does that when it cannot route some edges of these views (clusters laid out with
		// newrank, e.g. the graph view of ring_allreduce): "lost n30 n50 edge", exit status 1,
		// and a drawing without those edges. Rather than hand out an incomplete drawing, lay it
		// out again with straight edges, which need no routing; the views never set splines, so
		// the command-line default applies.
		if again, err2 := r.run(ctx, dotText, "-T"+string(format), "-Gsplines=line"); err2 == nil {
			out, err = again, nil
		} else if !errors.As(err2, new(*dotFailed)) {
			err = err2 // a deadline or oversized output: say that, not the first failure
		}
	}
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// dotRun runs Graphviz's dot program prog for one Render call.
type dotRun struct {
	prog, what string // program path, and "rendering SVG" to start errors with
	opts       RenderOptions
}

// dotFailed is the error of a dot that exited unsuccessfully.
type dotFailed struct {
	what, prog string
	err        error  // from exec.Cmd.Run
	msgs       string // dot's stderr, quoted for the message
	wrote      bool   // dot wrote a drawing before failing
}

func (e *dotFailed) Error() string {
	if e.err == nil {
		return fmt.Sprintf("%s: Graphviz's dot (%s) wrote nothing%s", e.what, e.prog, e.msgs)
	}
	return fmt.Sprintf("%s: Graphviz's dot (%s) failed: %v%s", e.what, e.prog, e.err, e.msgs)
}

// run runs dot with args, dotText on its stdin, and returns what it wrote to stdout.
func (r *dotRun) run(ctx context.Context, dotText []byte, args ...string) ([]byte, error) {
	ctx, kill := context.WithCancel(ctx) // also stops dot when its output overflows
	defer kill()
	cmd := exec.CommandContext(ctx, r.prog, args...)
	ownGroup(cmd)
	cmd.Stdin = bytes.NewReader(dotText)
	out := &cappedBuffer{limit: r.opts.MaxOutput, overflow: kill}
	msgs := &cappedBuffer{limit: r.opts.MaxStderr}
	cmd.Stdout, cmd.Stderr = out, msgs
	cmd.WaitDelay = r.opts.WaitDelay
	err := cmd.Run()
	switch {
	case out.over:
		return nil, fmt.Errorf("%s: Graphviz's dot wrote more than %s; refusing so large a drawing", r.what, byteSize(r.opts.MaxOutput))
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("%s: %w and was stopped", r.what, ErrTimeout)
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("%s: Graphviz's dot was stopped (%w)", r.what, context.Cause(ctx))
	case err != nil || out.buf.Len() == 0:
		return nil, &dotFailed{what: r.what, prog: r.prog, err: err, msgs: msgs.quote(), wrote: out.buf.Len() > 0}
	}
	return out.buf.Bytes(), nil
}

// Write renders a view built by Graph or Plan in the given format.
func Write(d *dot.Graph, format Format, w io.Writer) error {
	return Render([]byte(d.String()), format, w)
}

// cappedBuffer keeps the first limit bytes written to it and drops the rest, calling overflow (if
// set) the first time it has to drop something. It never fails a write, so the process writing
// into it is never left blocked on a pipe nobody reads.
type cappedBuffer struct {
	buf      bytes.Buffer
	limit    int64
	over     bool
	overflow func()
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.limit - int64(c.buf.Len())
	if int64(len(p)) > room {
		c.buf.Write(p[:max(room, 0)])
		if !c.over {
			c.over = true
			if c.overflow != nil {
				c.overflow()
			}
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

// quote formats what dot wrote to stderr for an error message: ":" and the text, indented, or
// nothing if it wrote nothing.
func (c *cappedBuffer) quote() string {
	text := strings.TrimSpace(c.buf.String())
	if text == "" {
		return ""
	}
	if c.over {
		text += "\n..."
	}
	return ":\n    " + strings.ReplaceAll(text, "\n", "\n    ")
}

// byteSize formats a byte count for a message: "256 MiB", "16 KiB", "100 bytes".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
