package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/ir"
)

// Attach sets the fields of opts that let exec.Run run this process's rank of a plan with ranks
// ranks, connecting to the other processes through c: Ranks (this process's rank only), Exchange
// (queue pair numbers, GIDs, PSNs, buffer addresses and rkeys) and Barrier.
func Attach(c *Comm, ranks int, opts *exec.Options) error {
	if c.Size() != ranks {
		return fmt.Errorf("bootstrap: the plan has %d ranks but %d processes joined: start %d processes (or pass -p ranks=%d)", ranks, c.Size(), ranks, c.Size())
	}
	opts.Ranks = []int{c.Rank()}
	opts.Exchange = Exchange(c, ranks, func(e exec.Endpoint) int { return e.Rank })
	opts.Barrier = c.Barrier
	return nil
}

// Report is one rank's outcome of a multi-process run, as rank 0 collects and prints it.
type Report struct {
	Rank       int           `json:"rank"`
	OK         bool          `json:"ok"`
	Error      string        `json:"error,omitempty"`      // why the run failed on this rank
	Mismatches []string      `json:"mismatches,omitempty"` // where memory differs from the reference
	Median     time.Duration `json:"median_ns,omitempty"`  // median iteration time on this rank
	WQEs       uint64        `json:"wqes,omitempty"`
	Triggered  uint64        `json:"triggered,omitempty"` // of WQEs, posted by QP triggers
	CQEs       uint64        `json:"cqes,omitempty"`
}

// maxMismatches bounds the mismatches a report carries; each already summarises a whole buffer.
const maxMismatches = 8

// ReportOf summarises what exec.Run returned on this process's rank.
func ReportOf(rank int, res *exec.Result, runErr error) Report {
	r := Report{Rank: rank}
	if res != nil {
		r.Median, r.WQEs, r.CQEs, r.Triggered = res.Latency.Median, res.WQEsPosted, res.CQEsPolled, res.Triggered
		for _, v := range res.Verdicts {
			for _, m := range v.Mismatches {
				if len(r.Mismatches) < maxMismatches {
					r.Mismatches = append(r.Mismatches, m.String())
				}
			}
		}
	}
	switch {
	case runErr != nil:
		r.Error = runErr.Error()
	case res == nil:
		r.Error = "no result"
	default:
		r.OK = res.OK
	}
	return r
}

// String is one line, e.g. "rank 2: ok" or "rank 1: FAIL: remote access error ...".
func (r Report) String() string {
	switch {
	case r.OK:
		return fmt.Sprintf("rank %d: ok", r.Rank)
	case r.Error != "":
		return fmt.Sprintf("rank %d: FAIL: %s", r.Rank, r.Error)
	}
	return fmt.Sprintf("rank %d: FAIL: memory differs from the reference: %s", r.Rank, strings.Join(r.Mismatches, "; "))
}

// Finish ends a multi-process run. Every process calls it once with its own report, whatever
// happened. A failed rank first tells the others (rank 0 forwards it), so ranks blocked in a
// Barrier stop at once instead of timing out. Rank 0 then collects every rank's report, waiting
// one timeout in all and no longer than ctx lasts, and returns them indexed by rank; a rank whose
// report has not come by then (it crashed, or hangs) gets a failing report saying so. The other
// ranks return nil.
func Finish(ctx context.Context, c *Comm, own Report) ([]Report, error) {
	if !own.OK {
		c.abort(ctx, firstLine(own.String()))
	}
	if c.world.Rank != 0 {
		b, err := json.Marshal(own)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: encoding the report: %v", err)
		}
		return nil, c.send(ctx, c.root, 0, kindReport, b)
	}
	all := make([]Report, c.world.Size)
	all[0] = own
	aborted := !own.OK
	// One deadline for all the reads, set before ctx's end can move it to the past: then the
	// read under way and those after it fail at once.
	deadline := c.deadline(ctx)
	peers := slices.Clone(c.peers)
	for _, p := range peers {
		if p != nil {
			p.SetReadDeadline(deadline)
		}
	}
	ended := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(ended)
		for _, p := range peers {
			if p != nil {
				p.SetReadDeadline(time.Unix(1, 0))
			}
		}
	})
	defer func() {
		if !stop() {
			<-ended // it ran: let it finish before the caller sets deadlines of its own
		}
	}()
	for r := 1; r < c.world.Size; r++ {
		rep, err := c.reportFrom(ctx, r)
		if err != nil {
			rep = Report{Rank: r, Error: err.Error()}
		}
		if !rep.OK && !aborted {
			// Release the ranks still waiting in a collective.
			c.abort(ctx, firstLine(rep.String()))
			aborted = true
		}
		all[r] = rep
	}
	return all, nil
}

// reportFrom reads frames from rank r until its report, skipping what it sent before it gave up
// (a Barrier or abort frame of the run). Finish has set the connection's read deadline.
func (c *Comm) reportFrom(ctx context.Context, r int) (Report, error) {
	conn := c.peers[r]
	if conn == nil {
		return Report{}, fmt.Errorf("not connected")
	}
	for {
		var kind frameKind
		var b []byte
		var err error
		if c.early != nil && c.early[r] != nil {
			kind, b = kindReport, c.early[r]
		} else {
			kind, b, err = readFrame(conn)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return Report{}, fmt.Errorf("verdict not collected: rank 0 stopped waiting for it: %v (its own output says how its run ended)", context.Cause(ctx))
		case err != nil && isTimeout(err):
			return Report{}, fmt.Errorf("sent no verdict within %v: it is still running or stuck (its own output says where)", c.timeout.Round(time.Second))
		case err != nil:
			return Report{}, fmt.Errorf("exited without a verdict (%v): its own output says why", err)
		case kind == kindReport:
			var rep Report
			if err := json.Unmarshal(b, &rep); err != nil {
				return Report{}, fmt.Errorf("sent an unreadable verdict: %v (run the same coredag binary on every rank)", err)
			}
			rep.Rank = r
			return rep, nil
		}
	}
}

// abort tells the others that this rank gives up: rank 0 tells every rank, the others tell rank 0.
// Best effort: a peer that is gone cannot be told.
func (c *Comm) abort(ctx context.Context, reason string) {
	if c.world.Rank != 0 {
		c.send(ctx, c.root, 0, kindAbort, []byte(reason))
		return
	}
	for r := 1; r < c.world.Size; r++ {
		c.send(ctx, c.peers[r], r, kindAbort, []byte(reason))
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// AllOK reports whether every report says ok, and returns an error listing the failed ranks
// otherwise.
func AllOK(reports []Report) error {
	var bad []string
	for _, r := range reports {
		if !r.OK {
			bad = append(bad, fmt.Sprint(r.Rank))
		}
	}
	if len(bad) > 0 {
		return errors.New("ranks " + strings.Join(bad, ", ") + " failed")
	}
	return nil
}

// RunProcess runs this process's rank of a multi-process run from start to verdict: it connects
// to the other ranks (cfg), runs plan on provider p with exec.Run (opts gets Ranks, Exchange and
// Barrier from Attach), and ends with Finish. It returns this rank's result (nil if the run did not
// start), this rank's report, and on rank 0 every rank's report. err is set only when the ranks
// could not be connected or the verdicts not collected; a failed run is in the reports.
func RunProcess(ctx context.Context, plan *ir.Plan, p nic.Provider, cfg Config, opts exec.Options) (*exec.Result, Report, []Report, error) {
	c, err := Connect(ctx, cfg)
	if err != nil {
		return nil, Report{Rank: cfg.Rank, Error: err.Error()}, nil, err
	}
	defer c.Close()
	if err := Attach(c, plan.Graph.Ranks, &opts); err != nil {
		own := Report{Rank: cfg.Rank, Error: err.Error()}
		all, ferr := Finish(ctx, c, own)
		return nil, own, all, ferr
	}
	res, runErr := exec.Run(ctx, plan, p, opts)
	own := ReportOf(cfg.Rank, res, runErr)
	all, err := Finish(ctx, c, own)
	return res, own, all, err
}
