package softnic

import (
	"fmt"

	"github.com/coredag/coredag/exec"
)

// trigger is a QP's armed run of send requests (exec.TriggerQP): posted by cq.Poll once the
// watched CQ has returned after more completions.
type trigger struct {
	cq     *cq
	after  int
	wrs    [exec.MaxTriggerWRs]exec.SendWR
	n      int
	armed  bool
	fired  bool // an outcome is waiting for Fired
	posted int
	err    error
}

var _ exec.TriggerQP = (*qp)(nil)

// ArmSend arms wr to be posted after after more successful completions of cq.
func (q *qp) ArmSend(c exec.CQ, after int, wr []exec.SendWR) error {
	w, ok := c.(*cq)
	switch {
	case !ok || w.ctx != q.ctx:
		return fmt.Errorf("softnic: %s: ArmSend on a CQ of another context or provider: %w", q, exec.ErrWrongContext)
	case len(wr) == 0 || len(wr) > exec.MaxTriggerWRs:
		return fmt.Errorf("softnic: %s: ArmSend with %d requests: a trigger holds 1..%d: %w", q, len(wr), exec.MaxTriggerWRs, exec.ErrBadRequest)
	case after < 1:
		return fmt.Errorf("softnic: %s: ArmSend after %d completions: arm for at least one, or post now: %w", q, after, exec.ErrBadRequest)
	case q.closed || w.closed:
		return fmt.Errorf("softnic: %s: ArmSend on a closed QP or CQ: %w", q, exec.ErrClosed)
	}
	t := &q.trig
	if t.cq != w {
		if t.cq != nil {
			t.cq.unwatch(q)
		}
		w.watch = append(w.watch, q)
	}
	t.cq, t.after, t.armed, t.fired = w, after, true, false
	t.n = copy(t.wrs[:], wr)
	return nil
}

// Fired reports the trigger's outcome once.
func (q *qp) Fired() (bool, int, error) {
	t := &q.trig
	if t.armed || !t.fired {
		return t.armed, 0, nil
	}
	t.fired = false
	return false, t.posted, t.err
}

// Disarm cancels the trigger.
func (q *qp) Disarm() { q.trig.armed, q.trig.fired = false, false }

// fire runs the triggers watching q after Poll returned got: an error completion disarms them,
// enough successful ones post their requests.
func (q *cq) fire(got []exec.WC) {
	failed := false
	for i := range got {
		failed = failed || got[i].Status != exec.StatusSuccess
	}
	for _, p := range q.watch {
		t := &p.trig
		if !t.armed || t.cq != q {
			continue
		}
		if failed {
			t.armed = false
			continue
		}
		if t.after -= len(got); t.after > 0 {
			continue
		}
		t.armed, t.fired = false, true
		t.posted, t.err = p.PostSend(t.wrs[:t.n])
	}
}

func (q *cq) unwatch(p *qp) {
	for i, x := range q.watch {
		if x == p {
			q.watch = append(q.watch[:i], q.watch[i+1:]...)
			return
		}
	}
}
