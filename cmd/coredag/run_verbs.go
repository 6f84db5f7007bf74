package main

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/bootstrap"
	"github.com/coredag/coredag/exec/provider"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/internal/stop"
)

// verbsFlags are the flags of `coredag run` for real RDMA devices: one process per rank, started
// by hand, by mpirun or by srun.
type verbsFlags struct {
	Provider   string `default:"softnic" enum:"softnic,verbs,ofi" help:"NIC: softnic (every rank in this process), verbs (a real RDMA device, one process per rank; needs a build with -tags verbs) or ofi (libfabric, on loopback unless --ofi-addr or --bootstrap say otherwise: every rank in this process, or one process per rank with --rank/--ranks/--bootstrap; needs a build with -tags ofi)."`
	Rank       int    `default:"-1" help:"With one process per rank (--provider verbs or ofi): this process's rank (default: from mpirun or srun, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID)."`
	NumRanks   int    `name:"ranks" default:"-1" help:"With one process per rank (--provider verbs or ofi): the number of processes (default: from mpirun or srun); sets the plan's ranks param unless -p ranks= is given."`
	Bootstrap  string `placeholder:"HOST:PORT" help:"With one process per rank (--provider verbs or ofi): rank 0 listens on HOST:PORT, the other ranks connect there to exchange endpoint addresses, queue numbers and memory keys."`
	SecretFile string `name:"job-secret-file" placeholder:"FILE" help:"With one process per rank: the job secret that every rank must hold, read from FILE, a file of yours that only you may read (mode 600). Default: COREDAG_JOB_SECRET, else the job key of Open MPI's mpirun."`
	Device     string `placeholder:"NAME" help:"With --provider verbs: RDMA device, e.g. mlx5_0 or rxe0 (ibv_devices lists them; default: the first)."`
	GIDIndex   int    `name:"gid-index" default:"-1" help:"With --provider verbs: GID table index for RoCE (default: the first RoCE v2 GID with an IPv4 address)."`
	OFIProv    string `name:"ofi-provider" placeholder:"NAME" help:"With --provider ofi: libfabric provider, e.g. shm, tcp;ofi_rxm or sockets (fi_info -l lists them; default: the first offering FI_TRIGGER and FI_RMA). --engine auto runs triggered plans on the offload engine where the provider has FI_TRIGGER, else on the poll engine."`
	OFIAddr    string `name:"ofi-addr" placeholder:"IFACE|IPV4" help:"With --provider ofi over IP (sockets, tcp;ofi_rxm): where the endpoints bind, a network interface (its first IPv4 address) or an IPv4 address of this host (default: 127.0.0.1 with a --bootstrap on loopback, else the address on which this host reaches rank 0's --bootstrap)."`
}

// verbsResult is the --json output of a verbs run on rank 0.
type verbsResult struct {
	File     string             `json:"file"`
	Plan     string             `json:"plan"`
	Ranks    int                `json:"ranks"`
	Provider string             `json:"provider"`
	Device   string             `json:"device"`
	Iters    int                `json:"iters"`
	OK       bool               `json:"ok"`
	Reports  []bootstrap.Report `json:"ranks_reports"`
}

// runPerProcess runs this process's rank of the plan on the provider (verbs, or ofi with
// --rank, --ranks or --bootstrap) and, on rank 0, prints the verdict of every rank. The ranks
// exchange their endpoints through exec/bootstrap. The provider is opened after the usage
// checks; engine selection assumes the caps its table entry gives.
func (c *runCmd) runPerProcess(e *env, prov provider.Entry) (err error) {
	name := prov.Name
	world, err := bootstrap.ResolveWorld(c.Rank, c.NumRanks, nil)
	if err != nil {
		return usageError("--provider %s: %v", name, err)
	}
	var secret []byte
	if world.Size > 1 {
		if c.Bootstrap == "" {
			return usageError("--provider %s with %d ranks needs --bootstrap HOST:PORT (rank 0's host and a free port, the same on every rank)", name, world.Size)
		}
		if err := bootstrap.CheckAddr(c.Bootstrap); err != nil {
			return usageError("%v", err)
		}
		if secret, _, err = bootstrap.ResolveSecret(c.SecretFile, nil); err != nil {
			return usageError("--job-secret-file: %v", err)
		}
		if secret == nil {
			return usageError("--provider %s with %d ranks needs a job secret that every rank holds and other users cannot read: %s; or pass --job-secret-file FILE, a file only you can read (mode 600)",
				name, world.Size, bootstrap.NoSecretHelp)
		}
	}
	if c.Explore > 0 || c.OnHang != "" || len(c.Dump) > 0 {
		return usageError("--explore, --on-hang and --dump work with the software NIC only")
	}
	if err := c.checkOutputs(e, c.timelinePath(world.Rank, world.Size)); err != nil {
		return err
	}
	pf := c.paramFlags
	if !hasParam(pf, "ranks") {
		pf.Params = append(append([]string(nil), pf.Params...), "ranks="+strconv.Itoa(world.Size))
	}
	l, err := mustLoad(e, c.File, pf, false, loadOptions{order: c.provenUnder()})
	if err != nil {
		return err
	}
	g := l.graph
	if g.Ranks != world.Size {
		return usageError("plan %s has %d ranks but %d processes run it: make -p ranks= match --ranks", g.Name, g.Ranks, world.Size)
	}
	// The provider is opened first, so that the engine is chosen from what it grants (--engine
	// auto on libfabric: the offload engine on triggered operations only where the provider has
	// FI_TRIGGER, else the poll engine).
	dev, err := prov.Open(c.providerConfig(g, world.Rank, 0))
	if err != nil {
		fmt.Fprintf(e.stderr, "coredag: rank %d: %v\n", world.Rank, err)
		return &exitError{code: exitFail}
	}
	defer dev.Close()
	engine, plan, ref, err := c.setup(e, l, dev.Caps(), nil)
	if err != nil {
		return err
	}
	target := plan.Target
	cfg := bootstrap.Config{World: world, Addr: c.Bootstrap, Secret: secret, Job: c.jobFacts(l, name, engine, target.Name),
		Logf: func(format string, args ...any) { fmt.Fprintf(e.stderr, "rank 0: "+format+"\n", args...) }}
	// A signal stops the run, within an iteration; the ranks still tell each other (an abort,
	// this rank's report) as Finish does after a failure.
	res, own, all, err := bootstrap.RunProcess(e.ctx, plan, dev, cfg,
		exec.Options{Engine: engine, Iters: c.Iters, Reference: ref, QuietRuntime: true, NoTriggers: c.NoTriggers, Timeline: c.Timeline != ""})
	if cause := stop.Stopped(e.ctx, err); cause != nil { // SIGINT or SIGTERM: no verdict, the interruption says it
		return cause
	}
	if c.Timeline != "" && res != nil {
		path := c.timelinePath(world.Rank, world.Size)
		defer func() { // after the verdicts, which a failed write must not hide
			if werr := c.writeTimeline(e, l.path, g, res, path); werr != nil && err == nil {
				err = werr
			}
		}()
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "coredag: rank %d: %v\n", world.Rank, err)
		return &exitError{code: exitFail}
	}
	if world.Rank != 0 {
		if !own.OK {
			fmt.Fprintf(e.stderr, "%s: %s\n", diag.QuoteName(l.path), diag.EscapeControls(fmt.Sprint(own)))
			return &exitError{code: exitFail}
		}
		return nil
	}
	ok := bootstrap.AllOK(all) == nil
	if c.JSON {
		if err := writeJSON(e.stdout, verbsResult{File: l.path, Plan: g.Name, Ranks: g.Ranks, Provider: name,
			Device: fmt.Sprint(dev), Iters: c.Iters, OK: ok, Reports: all}); err != nil {
			return err
		}
	} else {
		verdict := "PASS %s: memory matches the reference on every rank (%s, one process each)\n"
		if !ok {
			verdict = "FAIL %s: not every rank verified (%s, one process each)\n"
		}
		fmt.Fprintf(e.stdout, verdict, diag.QuoteName(l.path), english.Plural(g.Ranks, "rank"))
		fmt.Fprintf(e.stdout, "  plan %s, %s engine, target %s, %s on %v, %s\n", g.Name, engine, target.Name, name, dev, english.Plural(c.Iters, "iteration"))
		for _, r := range all {
			line := r.String()
			if r.OK && r.Median > 0 {
				line += fmt.Sprintf(", median iteration %s, %s posted (%d by triggers), %s polled", fmtDuration(r.Median), english.Plural(int(r.WQEs), "WQE"), r.Triggered, english.Plural(int(r.CQEs), "CQE"))
			}
			fmt.Fprintf(e.stdout, "  %s\n", strings.ReplaceAll(line, "\n", "\n    "))
		}
	}
	if !ok {
		return &exitError{code: exitFail}
	}
	return nil
}

// jobFacts is what every process of a run must agree on, compared by the bootstrap so that
// processes started with different plans or options are refused at once, naming the difference.
func (c *runCmd) jobFacts(l *loaded, provider string, engine exec.Engine, target string) []bootstrap.Fact {
	sum := sha256.Sum256(l.src)
	f := []bootstrap.Fact{{Key: "plan", Text: fmt.Sprintf("plan %s (sha256 %x... of its text)", l.graph.Name, sum[:8])}}
	for _, p := range l.graph.Params {
		f = append(f, bootstrap.Fact{Key: "param " + p.Name, Text: fmt.Sprintf("%s=%d", p.Name, p.Value)})
	}
	return append(f,
		bootstrap.Fact{Key: "iters", Text: fmt.Sprintf("--iters %d", c.Iters)},
		bootstrap.Fact{Key: "target", Text: "--target " + target},
		bootstrap.Fact{Key: "engine", Text: fmt.Sprintf("--engine %v", engine)},
		bootstrap.Fact{Key: "provider", Text: strings.TrimSpace("--provider " + provider + " " + c.OFIProv)},
		bootstrap.Fact{Key: "no-triggers", Text: fmt.Sprintf("--no-triggers=%v", c.NoTriggers)})
}

// hasParam reports whether -p NAME=... was given.
func hasParam(p paramFlags, name string) bool {
	for _, kv := range p.Params {
		if k, _, ok := strings.Cut(kv, "="); ok && strings.TrimSpace(k) == name {
			return true
		}
	}
	return false
}
