package simgrid

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

//go:embed cc/engine.cc
var engineSource []byte

// Options are the settings of a SimGrid run.
type Options struct {
	// CacheDir keeps the engine coredag builds ("" : the user's cache directory, coredag/simgrid
	// in it).
	CacheDir string
	// CXX is the C++ compiler ("": g++).
	CXX string
	// Timeout bounds SimGrid's run (0: only the context does). Building the engine is bounded
	// by the context alone.
	Timeout time.Duration
	// Dir, when set, is where the platform and the schedule are written (platform.xml and
	// schedule.txt), and kept; otherwise they go to a temporary directory, removed after.
	Dir string
	// MaxBytes bounds SimGrid's address space (ulimit -v; 0: no bound). A run that needs more
	// ends with an error that names the figure.
	MaxBytes int64
}

// Result is what SimGrid says of one iteration.
type Result struct {
	// Time is the simulated time of the iteration in nanoseconds: when the last activity ended.
	Time float64
	// Activities is the schedule's size; Last names the op whose activity ended last.
	Activities int
	Last       string
	// Wall is how long SimGrid took, loading the platform and the schedule included, CPU its
	// processor time (user and system), MaxRSS its peak memory in bytes (0 where the system
	// does not say).
	Wall, CPU time.Duration
	MaxRSS    int64
}

// ErrBudget is wrapped by the error of a run that needed more memory than Options.MaxBytes.
var ErrBudget = errors.New("over the memory budget")

// ErrNoSimGrid is wrapped by the errors that say SimGrid or the compiler is not installed.
var ErrNoSimGrid = errors.New("SimGrid is not installed (on Debian: apt-get install g++ libsimgrid-dev)")

// config is SimGrid's configuration for every run: CM02, the network model without TCP's
// corrections (a message takes the links' latency plus its bytes over its share of the
// bandwidth), without the reverse traffic of acknowledgements, and quiet. The workers' stacks
// are small, as they only start and wait for one activity at a time.
//
// Above noGuardRanks, the stacks also have no guard page: with one, 16,384 ranks (32,768
// workers) passed Linux's 65,536 mappings of a process and SimGrid aborted. Without, SimGrid
// touches every stack when it makes it (1.2 GB instead of 134 MB at 4,096 ranks), so below it
// they keep theirs.
const noGuardRanks = 8192

var config = []string{"--cfg=network/model:CM02", "--cfg=network/crosstraffic:0", "--cfg=contexts/stack-size:256", "--log=root.thres:warning"}

// Engine returns the path of the engine program, building it first if the cache has none for
// this version of engine.cc.
func Engine(ctx context.Context, opt Options) (string, error) {
	cxx := opt.CXX
	if cxx == "" {
		cxx = "g++"
	}
	dir := opt.CacheDir
	if dir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("simgrid: no cache directory for the engine: %v", err)
		}
		dir = filepath.Join(d, "coredag", "simgrid")
	}
	sum := sha256.Sum256(append(append([]byte(cxx), 0), engineSource...))
	bin := filepath.Join(dir, "coredag-simgrid-"+hex.EncodeToString(sum[:6]))
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	path, err := exec.LookPath(cxx)
	if err != nil {
		return "", fmt.Errorf("simgrid: the engine is built with a C++ compiler, and %s was not found: %w", cxx, ErrNoSimGrid)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("simgrid: %v", err)
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("simgrid: %v", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "engine.cc")
	if err := os.WriteFile(src, engineSource, 0o644); err != nil {
		return "", fmt.Errorf("simgrid: %v", err)
	}
	out := filepath.Join(tmp, "engine")
	cmd := exec.CommandContext(ctx, path, "-O2", "-std=c++17", "-o", out, src, "-lsimgrid")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := stderr.String()
		if strings.Contains(msg, "simgrid/s4u.hpp") || strings.Contains(msg, "-lsimgrid") {
			return "", fmt.Errorf("simgrid: building the engine with %s: %s: %w", cxx, firstLine(msg), ErrNoSimGrid)
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("simgrid: building the engine: %v", ctx.Err())
		}
		return "", fmt.Errorf("simgrid: building the engine with %s failed (%v):\n%s", cxx, err, tail(msg, 20))
	}
	if err := os.Rename(out, bin); err != nil {
		return "", fmt.Errorf("simgrid: %v", err)
	}
	return bin, nil
}

// Run simulates the schedule on the platform with SimGrid.
func Run(ctx context.Context, s *Schedule, p Platform, opt Options) (Result, error) {
	if h := p.Tree.Hosts(); h < s.Ranks {
		return Result{}, fmt.Errorf("simgrid: the fat tree %s has %d hosts, and the plan %d ranks", p.Tree, h, s.Ranks)
	}
	if math.IsNaN(p.LinkBps) || math.IsInf(p.LinkBps, 0) || p.LinkBps <= 0 {
		return Result{}, fmt.Errorf("simgrid: link bandwidth %v bytes/s: must be a finite number > 0", p.LinkBps)
	}
	if math.IsNaN(p.LinkLatency) || math.IsInf(p.LinkLatency, 0) || p.LinkLatency < 0 {
		return Result{}, fmt.Errorf("simgrid: link latency %v s: must be a finite number >= 0", p.LinkLatency)
	}
	bin, err := Engine(ctx, opt)
	if err != nil {
		return Result{}, err
	}
	dir := opt.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "coredag-simgrid-"); err != nil {
			return Result{}, fmt.Errorf("simgrid: %v", err)
		}
		defer os.RemoveAll(dir)
	}
	plat := filepath.Join(dir, "platform.xml")
	if err := os.WriteFile(plat, p.XML(), 0o644); err != nil {
		return Result{}, fmt.Errorf("simgrid: %v", err)
	}
	sched := filepath.Join(dir, "schedule.txt")
	f, err := os.Create(sched)
	if err != nil {
		return Result{}, fmt.Errorf("simgrid: %v", err)
	}
	if _, err := s.WriteTo(f); err != nil {
		f.Close()
		return Result{}, fmt.Errorf("simgrid: writing the schedule: %v", err)
	}
	if err := f.Close(); err != nil {
		return Result{}, fmt.Errorf("simgrid: writing the schedule: %v", err)
	}
	if opt.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opt.Timeout)
		defer cancel()
	}
	args := append([]string{plat, sched}, config...)
	if s.Ranks > noGuardRanks {
		args = append(args, "--cfg=contexts/guard-size:0")
	}
	var cmd *exec.Cmd
	if opt.MaxBytes > 0 { // the shell sets the limit for the engine it becomes
		limit := fmt.Sprintf("ulimit -v %d && exec \"$0\" \"$@\"", max(opt.MaxBytes>>10, 1))
		cmd = exec.CommandContext(ctx, "sh", append([]string{"-c", limit, bin}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, bin, args...)
	}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	runErr := cmd.Run()
	wall := time.Since(start)
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && opt.Timeout > 0 {
			return Result{}, fmt.Errorf("simgrid: SimGrid did not finish within %v (%d activities); the time bound is --timeout", opt.Timeout, len(s.acts))
		}
		return Result{}, fmt.Errorf("simgrid: %v", ctx.Err())
	}
	res := Result{Activities: len(s.acts), Wall: wall, MaxRSS: maxRSS(cmd.ProcessState)}
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
	}
	var finished, total int64 = -1, -1
	last := int64(-1)
	for _, l := range strings.Split(stdout.String(), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "time":
			if t, err := strconv.ParseFloat(f[1], 64); err == nil {
				res.Time = t * 1e9
			}
		case len(f) == 4 && f[0] == "finished":
			finished, _ = strconv.ParseInt(f[1], 10, 64)
			total, _ = strconv.ParseInt(f[3], 10, 64)
		case len(f) == 2 && f[0] == "last":
			last, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	if runErr != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "error while loading shared libraries") {
			return Result{}, fmt.Errorf("simgrid: the engine %s cannot load SimGrid (%s): %w; remove the engine to rebuild it", bin, firstLine(msg), ErrNoSimGrid)
		}
		if opt.MaxBytes > 0 && outOfMemory(msg) {
			return Result{}, fmt.Errorf("simgrid: SimGrid needed more than its %d MiB of memory (%d activities): %w; raise it (--mem) or simulate fewer ranks", opt.MaxBytes>>20, len(s.acts), ErrBudget)
		}
		if finished >= 0 && finished < total {
			return Result{}, fmt.Errorf("simgrid: %d of %d activities never ran: the schedule has a cycle", total-finished, total)
		}
		return Result{}, fmt.Errorf("simgrid: SimGrid failed (%v):\n%s", runErr, tail(msg, 20))
	}
	if finished < 0 || finished != int64(len(s.acts)) || total != int64(len(s.acts)) {
		return Result{}, fmt.Errorf("simgrid: the engine's output is not understood:\n%s", tail(stdout.String(), 10))
	}
	res.Last = s.OpOf(int(last))
	return res, nil
}

// outOfMemory reports whether SimGrid's error output says an allocation failed.
func outOfMemory(msg string) bool {
	for _, m := range []string{"bad_alloc", "Cannot allocate memory", "out of memory", "Failed to allocate", "mmap"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "error") || strings.Contains(l, "fatal") {
			return strings.TrimSpace(l)
		}
	}
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = append([]string{"..."}, ls[len(ls)-n:]...)
	}
	return strings.Join(ls, "\n")
}
