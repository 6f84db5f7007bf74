package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// triggerListing is the part of `compile --format json` docs/compile-json.md documents for the
// triggered targets, decoded independently of the listing package's types.
type triggerListing struct {
	Target struct {
		Name    string `json:"name"`
		Trigger *struct {
			Provider          string   `json:"provider"`
			MaxOutstanding    int      `json:"max_outstanding"`
			CounterWorkCost   int      `json:"counter_work_cost"`
			MaxCounters       int      `json:"max_counters"`
			MaxCounter        uint64   `json:"max_counter"`
			RecvThresholdZero bool     `json:"recv_threshold_zero"`
			Guesses           []string `json:"guesses"`
		} `json:"trigger"`
	} `json:"target"`
	Ranks []struct {
		Rank   int `json:"rank"`
		Queues []struct {
			Name string `json:"name"`
			WQEs []struct {
				Opcode string `json:"opcode"`
				Op     string `json:"op"`
			} `json:"wqes"`
		} `json:"queues"`
		Trigger *struct {
			Counters []struct {
				Index        int     `json:"index"`
				Name         string  `json:"name"`
				Kind         string  `json:"kind"`
				Queue        string  `json:"queue"`
				Op           string  `json:"op"`
				Region       string  `json:"region"`
				PerIteration uint64  `json:"per_iteration"`
				Iterations   *uint64 `json:"iterations"`
			} `json:"counters"`
			Work []struct {
				Index     int     `json:"index"`
				Kind      string  `json:"kind"`
				Op        string  `json:"op"`
				Pos       string  `json:"pos"`
				Counter   string  `json:"counter"`
				Threshold *uint64 `json:"threshold"`
				Cause     string  `json:"cause"`
				Units     int     `json:"units"`
				WQE       *struct {
					Queue  string `json:"queue"`
					Index  int    `json:"index"`
					Opcode string `json:"opcode"`
				} `json:"wqe"`
				Target  string  `json:"target"`
				Value   *uint64 `json:"value"`
				CPUWait *struct {
					Counter   string `json:"counter"`
					Threshold uint64 `json:"threshold"`
				} `json:"cpu_wait"`
			} `json:"work"`
			Summary struct {
				Counters     int              `json:"counters"`
				Outstanding  int              `json:"outstanding"`
				Units        int              `json:"units"`
				CounterLimit *jsonLimitDecode `json:"counter_limit"`
			} `json:"summary"`
		} `json:"trigger"`
	} `json:"ranks"`
	CounterLimit *jsonLimitDecode `json:"counter_limit"`
}

type jsonLimitDecode struct {
	Rank         int    `json:"rank"`
	Counter      string `json:"counter"`
	PerIteration uint64 `json:"per_iteration"`
	MaxCounter   uint64 `json:"max_counter"`
	Iterations   uint64 `json:"iterations"`
}

func compileTriggeredJSON(t *testing.T, target, path string, params ...string) triggerListing {
	t.Helper()
	args := append([]string{"compile", "--format", "json", "--target", target}, params...)
	code, stdout, stderr := coredag(t, "", append(args, path)...)
	require.Equal(t, exitOK, code, stderr)
	var l triggerListing
	require.NoError(t, json.Unmarshal([]byte(stdout), &l), stdout)
	return l
}

// The JSON listing of a triggered plan carries each rank's counters, its triggered work (each
// entry with its counter, threshold, kind, op and file:line) and its summary, as the text does.
func TestCompileTriggeredJSON(t *testing.T) {
	t.Parallel()
	l := compileTriggeredJSON(t, "triggered-sockets", "testdata/compile/exchange.dag")
	require.NotNil(t, l.Target.Trigger)
	assert.Equal(t, "sockets", l.Target.Trigger.Provider)
	assert.Equal(t, 4096, l.Target.Trigger.MaxOutstanding)
	assert.Equal(t, []string{"max_outstanding", "max_counters"}, l.Target.Trigger.Guesses)
	require.Len(t, l.Ranks, 2)
	tr := l.Ranks[0].Trigger
	require.NotNil(t, tr)

	names := []string{}
	for i, c := range tr.Counters {
		assert.Equal(t, i, c.Index)
		names = append(names, c.Name+"/"+c.Kind)
	}
	assert.Equal(t, []string{"q.sq.scnt/send", "q.rq.rcnt/recv", "host.cnt/host", "join.red/join", "join.tx2/join", "q.rq.post/post"}, names)
	assert.Equal(t, "q.sq", tr.Counters[0].Queue)
	assert.Equal(t, uint64(2), tr.Counters[0].PerIteration)
	assert.Equal(t, "red", tr.Counters[3].Op)
	require.NotNil(t, tr.Counters[0].Iterations)
	assert.Equal(t, uint64((1<<31-1-2)/2+1), *tr.Counters[0].Iterations) // sockets: 32-bit counters

	// tx waits for nothing; red is a HOST step behind a join of two counter-adds; tx2 too.
	require.Len(t, tr.Work, 10)
	w := tr.Work[0]
	assert.Equal(t, "op", w.Kind)
	assert.Equal(t, "tx", w.Op)
	assert.Equal(t, "testdata/compile/exchange.dag:6:4", w.Pos)
	assert.Empty(t, w.Counter)
	assert.Nil(t, w.Threshold)
	assert.Equal(t, 0, w.Units)
	require.NotNil(t, w.WQE)
	assert.Equal(t, "q.sq", w.WQE.Queue)
	assert.Equal(t, "SEND", w.WQE.Opcode)

	add := tr.Work[2]
	assert.Equal(t, "counter-add", add.Kind)
	assert.Equal(t, "red", add.Op)
	assert.Equal(t, "q.rq.rcnt", add.Counter)
	require.NotNil(t, add.Threshold)
	assert.Equal(t, uint64(1), *add.Threshold)
	assert.Equal(t, "rx", add.Cause)
	assert.Equal(t, "join.red", add.Target)
	require.NotNil(t, add.Value)
	assert.Equal(t, uint64(1), *add.Value)
	assert.Nil(t, add.WQE)
	assert.Equal(t, 1, add.Units)

	host := tr.Work[4]
	assert.Equal(t, "join.red", host.Counter)
	assert.Equal(t, uint64(2), *host.Threshold)
	assert.Equal(t, "HOST", host.WQE.Opcode)
	assert.Equal(t, 0, host.Units, "the CPU runs HOST steps: they hold no NIC budget")

	// The summary adds up the entries.
	units, outstanding := 0, 0
	for _, w := range tr.Work {
		units += w.Units
		if w.Units > 0 {
			outstanding++
		}
	}
	assert.Equal(t, 6, tr.Summary.Counters)
	assert.Equal(t, 7, tr.Summary.Outstanding)
	assert.Equal(t, outstanding, tr.Summary.Outstanding)
	assert.Equal(t, units, tr.Summary.Units)
	require.NotNil(t, tr.Summary.CounterLimit)
	assert.Equal(t, "q.sq.scnt", tr.Summary.CounterLimit.Counter)
	require.NotNil(t, l.CounterLimit)
	assert.Equal(t, jsonLimitDecode{Rank: 0, Counter: "q.sq.scnt", PerIteration: 2, MaxCounter: 1<<31 - 1, Iterations: (1<<31-1-2)/2 + 1}, *l.CounterLimit)

	// On cxi counter work costs 2 units.
	l = compileTriggeredJSON(t, "triggered-cxi", "plans/ring_allgather.dag")
	tr = l.Ranks[0].Trigger
	require.NotNil(t, tr)
	units, adds := 0, 0
	for _, w := range tr.Work {
		units += w.Units
		if w.Kind == "counter-add" {
			adds++
			assert.Equal(t, 2, w.Units, "%+v", w)
		}
	}
	require.Positive(t, adds)
	assert.Equal(t, units, tr.Summary.Units)

	// Targets without triggers have no trigger sections.
	l = compileTriggeredJSON(t, "connectx", "testdata/compile/exchange.dag")
	assert.Nil(t, l.Target.Trigger)
	assert.Nil(t, l.Ranks[0].Trigger)
	assert.Nil(t, l.CounterLimit)
}

// The text listing ends each rank's triggered work with the same summary.
func TestCompileTriggeredSummary(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := coredag(t, "", "compile", "--target", "triggered-sockets", "testdata/compile/exchange.dag")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "  triggered: 6 counters, 7 triggered entries outstanding per iteration (7 units, counter work costing 1; limit 4096), counters overflow after 1073741823 iterations (q.sq.scnt, +2 per iteration, limit 2147483647)\n")
	assert.Contains(t, stdout, "\ntriggered: counters overflow after 1073741823 iterations (q.sq.scnt on rank 0, +2 per iteration, limit 2147483647)\n")
}

// check --target fails a plan over the target's limits with compile's diagnostics; without
// --target the default target's limits are warnings and the plan passes.
func TestCheckTarget(t *testing.T) {
	t.Parallel()
	// The teaching ring allreduce holds a receive back until the reduce that frees its buffer.
	code, stdout, _ := coredag(t, "", "check", "--json", "--target", "triggered-cxi", "docs/examples/ring_allreduce.dag", "plans/ring_allgather.dag")
	assert.Equal(t, exitFail, code)
	var rs []checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &rs), stdout)
	require.Len(t, rs, 2)
	assert.False(t, rs[0].OK)
	assert.Equal(t, "triggered-cxi", rs[0].Target)
	require.Len(t, rs[0].Diagnostics, 1)
	d := rs[0].Diagnostics[0]
	assert.Equal(t, "target", string(d.Code))
	assert.Equal(t, [2]int{15, 6}, [2]int{d.Line, d.Col})
	assert.Contains(t, d.Message, "only at threshold 0")
	assert.True(t, rs[1].OK)
	assert.Equal(t, "triggered-cxi", rs[1].Target)

	code, stdout, stderr := coredag(t, "", "check", "--target", "triggered-cxi", "plans/ring_allgather.dag")
	assert.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "within the limits of target triggered-cxi")

	code, stdout, _ = coredag(t, "", "check", "--json", "docs/examples/errors/target_depth.dag")
	assert.Equal(t, exitOK, code)
	rs = nil
	require.NoError(t, json.Unmarshal([]byte(stdout), &rs), stdout)
	require.Len(t, rs, 1)
	assert.True(t, rs[0].OK)
	assert.Empty(t, rs[0].Target)
	assert.Empty(t, rs[0].Diagnostics)
	require.Len(t, rs[0].Warnings, 2)
	assert.Contains(t, rs[0].Warnings[0].Message, "target connectx")

	code, _, stderr = coredag(t, "", "check", "--target", "nosuch", "plans/ring_allgather.dag")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "unknown target")
}

// targets lists the trigger profiles, guesses marked, in text and JSON.
func TestTargetsTriggerProfiles(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := coredag(t, "", "targets")
	require.Equal(t, exitOK, code, stderr)
	var row string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "triggered-cxi ") && strings.Contains(l, "cxi  ") {
			row = l
		}
	}
	assert.Equal(t, []string{"triggered-cxi", "cxi", "504", "2", "2048*", "48", "(max", "281474976710655)*", "yes"}, strings.Fields(row), stdout)
	assert.Contains(t, stdout, "* a guess, not a documented provider figure")

	code, stdout, stderr = coredag(t, "", "targets", "--json")
	require.Equal(t, exitOK, code, stderr)
	var ts []struct {
		Name    string `json:"name"`
		Trigger *struct {
			MaxOutstanding    int      `json:"max_outstanding"`
			CounterWorkCost   int      `json:"counter_work_cost"`
			RecvThresholdZero bool     `json:"recv_threshold_zero"`
			Guesses           []string `json:"guesses"`
		} `json:"trigger"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &ts), stdout)
	byName := map[string]int{}
	for i, x := range ts {
		byName[x.Name] = i
	}
	cxi := ts[byName["triggered-cxi"]].Trigger
	require.NotNil(t, cxi)
	assert.Equal(t, 504, cxi.MaxOutstanding)
	assert.Equal(t, 2, cxi.CounterWorkCost)
	assert.True(t, cxi.RecvThresholdZero)
	assert.Equal(t, []string{"max_counters", "max_counter"}, cxi.Guesses)
	assert.Nil(t, ts[byName["connectx"]].Trigger)
}

// A wait for landed writes is a remote-write counter of its region (kind land, with the region)
// in both listings: the write after the wait is triggered at the wait's count on it, and the
// wait's HOST step says the CPU waits for the same count.
func TestCompileTriggeredLandCounter(t *testing.T) {
	t.Parallel()
	const file = "testdata/onesided/counted_chain.dag"
	l := compileTriggeredJSON(t, "triggered-sockets", file, "-p", "ranks=3", "-p", "c=2", "--rank", "1")
	require.Len(t, l.Ranks, 1)
	tr := l.Ranks[0].Trigger
	require.NotNil(t, tr)
	land := map[string]string{}
	for _, c := range tr.Counters {
		if c.Kind == "land" {
			land[c.Name] = c.Region
			assert.Equal(t, uint64(1), c.PerIteration, c.Name)
			assert.Empty(t, c.Queue, c.Name)
		}
	}
	assert.Equal(t, map[string]string{"data[0:4].land": "data[0:4]", "data[4:8].land": "data[4:8]"}, land)
	var fwd, got bool
	for _, w := range tr.Work {
		switch {
		case w.Op == "fwd[0]" && w.Kind == "op":
			fwd = true
			assert.Equal(t, "data[0:4].land", w.Counter)
			require.NotNil(t, w.Threshold)
			assert.Equal(t, uint64(1), *w.Threshold)
			assert.Equal(t, "got[0]", w.Cause)
			assert.Equal(t, 1, w.Units, "the NIC holds it")
		case w.Op == "got[0]" && w.Kind == "op":
			got = true
			require.NotNil(t, w.CPUWait)
			assert.Equal(t, "data[0:4].land", w.CPUWait.Counter)
			assert.Equal(t, uint64(1), w.CPUWait.Threshold)
		}
	}
	assert.True(t, fwd && got, "fwd[0] and got[0] are in rank 1's triggered work")

	code, stdout, stderr := coredag(t, "", "compile", "--target", "triggered", "-p", "ranks=3", "-p", "c=2", "--rank", "1", file)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `#5 +data\[0:4\]\.land +land +\+1 per iteration +remote writes into data\[0:4\]`, stdout)
	assert.Regexp(t, `when data\[0:4\]\.land >= 1 \(got\[0\] holds\) +RDMA_WRITE down\.sq\[0\] +fwd\[0\]`, stdout)
	assert.Regexp(t, `at once, then the CPU waits for data\[0:4\]\.land >= 1 +HOST host\[0\] +got\[0\]`, stdout)
}
