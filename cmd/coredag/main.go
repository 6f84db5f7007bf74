// Command coredag checks, compiles, runs and draws .dag plans: SPMD schedules of RDMA NIC work.
//
// Each subcommand lives in its own file and registers itself with register in an init function;
// this file holds only what they share: flag parsing, exit codes and the output streams.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/atomicfile"
)

// version is the release of the tool; -ldflags "-X main.version=..." overrides it.
var version = "0.1.0-dev"

// Exit codes shared by all subcommands.
const (
	exitOK    = 0 // success
	exitFail  = 1 // diagnostics found, verification failed, run did not match the reference
	exitUsage = 2 // bad flags or arguments, unreadable or oversized files, runs past the memory budget
	exitBug   = 3 // a bug in coredag: a panic of the command, recovered, with its stack
)

// env is what a subcommand's Run method receives: the process's streams, and a context that
// SIGINT or SIGTERM cancels (its cause is an *interruption), for the work that can stop. Work
// the signal stopped fails with an error of its own (a wrapped cause, or a failure it met as it
// stopped), which is not the command's to report: stop.Stopped(e.ctx, err) turns it into the
// interruption, which main reports alone.
type env struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
}

// exitError ends a command with a given exit code after the command has printed its own output.
type exitError struct {
	code int
	err  error // optional, printed by main
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// usageError reports bad arguments: exit code 2.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// command describes a subcommand; new builds a fresh flag struct for each invocation.
type command struct {
	name, help string
	new        func() any
}

var commands []command

// register adds a subcommand. Each subcommand file calls it from init.
func register(name, help string, new func() any) {
	commands = append(commands, command{name, help, new})
}

type cli struct {
	Version    kong.VersionFlag `help:"Print the version and exit."`
	CPUProfile string           `name:"cpuprofile" placeholder:"FILE" help:"Write a CPU profile of the command to FILE (go tool pprof)."`
	MemProfile string           `name:"memprofile" placeholder:"FILE" help:"Write a heap profile to FILE at the end of the command (go tool pprof)."`
}

const description = `coredag checks, compiles, runs and draws .dag plans: SPMD schedules of RDMA NIC
work (sends, receives, RDMA writes and reads, atomics, local reductions) and the dependencies
between them. Run "coredag COMMAND --help" for a command's flags.`

func main() {
	if os.Getenv("GOGC") == "" {
		// A check's working set is one large Graph plus verification structures that live
		// through the pass, so the heap peaks at about (1 + GOGC/100) times what is live at the
		// collection before: at 75 rather than Go's 100, checking the ring allreduce at 512
		// ranks peaks at 540 MB instead of 627 MB, in the same time (alternating runs).
		debug.SetGCPercent(75)
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// exitRequest carries kong's exit (after --help or --version) out of its parser.
type exitRequest struct{ code int }

// run executes one coredag invocation and returns its exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	opts := []kong.Option{
		kong.Name("coredag"),
		kong.Description(description),
		kong.Writers(stdout, stderr),
		kong.Vars{"version": "coredag " + version},
		kong.UsageOnError(),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Exit(func(c int) { panic(exitRequest{c}) }),
	}
	for _, c := range commands {
		opts = append(opts, kong.DynamicCommand(c.name, c.help, "", c.new()))
	}
	helpExit := -1 // the exit code after the help text, when not kong's
	defer func() {
		if r := recover(); r != nil {
			req, ok := r.(exitRequest)
			if !ok {
				panic(r)
			}
			code = req.code
			if helpExit >= 0 {
				code = helpExit
			}
		}
	}()
	var root cli
	parser, err := kong.New(&root, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "coredag: internal error: %v\n", err)
		return exitUsage
	}
	if len(args) == 0 {
		// As go and git do: the whole list of commands, on stderr, and a usage exit.
		parser.Stdout = stderr
		args = []string{"--help"}
		helpExit = exitUsage
	} else if args[0] == "help" {
		// "coredag help [COMMAND...]" is "coredag [COMMAND...] --help", as in go, git and kubectl.
		if len(args) > 1 && !slices.ContainsFunc(commands, func(c command) bool { return c.name == args[1] }) {
			fmt.Fprintf(stderr, "coredag help %s: unknown command; run \"coredag help\" for the list\n", diag.EscapeControls(args[1]))
			return exitUsage
		}
		args = append(slices.Clone(args[1:]), "--help")
	}
	ctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "coredag: %s\n", diag.EscapeControls(err.Error()))
		return exitUsage
	}
	stop, err := root.profiles()
	if err == nil {
		var intr *interruption
		err, intr = runInterruptible(func(c context.Context) error {
			return ctx.Run(&env{ctx: c, stdin: stdin, stdout: stdout, stderr: stderr})
		})
		if intr != nil {
			return intr.report(stderr, commandName(ctx.Command()), err)
		}
		if perr := stop(); err == nil {
			err = perr
		}
	}
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "coredag: %s\n", diag.EscapeControls(ee.err.Error()))
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "coredag: %s\n", diag.EscapeControls(err.Error()))
	return exitFail
}

// interruption is the cause of the cancellation of env.ctx: the signal that asked coredag to stop.
type interruption struct{ sig syscall.Signal }

func (i *interruption) Error() string { return "interrupted by " + signalName(i.sig) }

// Is makes an interruption a context.Canceled, as the cancellation of a context is.
func (i *interruption) Is(target error) bool { return target == context.Canceled }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// interruptGrace is how long a command has, once interrupted, to stop its work (children are
// killed at once, by their context) and return, before coredag exits without it.
const interruptGrace = 2 * time.Second

// runInterruptible runs work with a context that SIGINT or SIGTERM cancels. Without a signal it
// returns work's error. After one, it waits up to interruptGrace (or a second signal) for work
// to return, and returns its error, if it did, and the interruption.
func runInterruptible(work func(context.Context) error) (error, *interruption) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- &exitError{code: exitBug, err: fmt.Errorf("internal error: %v\nThis is a bug in coredag; please report it with the command line and this stack:\n%s", r, debug.Stack())}
			}
		}()
		done <- work(ctx)
	}()
	select {
	case err := <-done:
		return err, nil
	case s := <-sigs:
		intr := &interruption{sig: s.(syscall.Signal)}
		cancel(intr)
		select {
		case err := <-done:
			return err, intr
		case <-sigs:
		case <-time.After(interruptGrace):
		}
		return errWorkRunning, intr
	}
}

// errWorkRunning stands for the error of a command that did not return in interruptGrace.
var errWorkRunning = errors.New("still running")

// report says what an interruption stopped: the command, its own error if it returned one
// (Graphviz's dot stopped, say), and the output files left as they were, whose unfinished
// copies it removes. It returns the exit code of a process killed by the signal, 128 + its
// number, as shells report it: 130 for SIGINT, 143 for SIGTERM.
func (i *interruption) report(w io.Writer, command string, err error) int {
	fmt.Fprintf(w, "coredag: %s %s\n", command, i)
	switch {
	case err == errWorkRunning:
		fmt.Fprintf(w, "coredag: %s did not stop within %v; exiting without it\n", command, interruptGrace)
	case err != nil && err.Error() != i.Error():
		fmt.Fprintf(w, "coredag: %s\n", diag.EscapeControls(err.Error()))
	}
	for _, path := range atomicfile.RemoveUnfinished() {
		fmt.Fprintf(w, "coredag: %s left as it was (its unfinished new copy removed)\n", diag.QuoteName(path))
	}
	return 128 + int(i.sig)
}

// commandName is the subcommand of kong's command line: "export msccl" of "export msccl <file>".
func commandName(cmdline string) string {
	var words []string
	for _, w := range strings.Fields(cmdline) {
		if strings.HasPrefix(w, "<") {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

// A subcommand file looks like this:
//
//	func init() {
//		register("check", "Check plans for mistakes.", func() any { return &checkCmd{} })
//	}
//
//	type checkCmd struct {
//		Files []string `arg:"" help:"Plan files."`
//	}
//
//	func (c *checkCmd) Run(e *env) error { ... }
//
// Run returns nil (exit 0), an *exitError for a specific code (usageError for 2), or another
// error (printed, exit 1). Plans are read through loadPlans in load.go, which takes the shared
// -p NAME=VALUE parameter flags (paramFlags) and prints diagnostics with printDiagnostics.
