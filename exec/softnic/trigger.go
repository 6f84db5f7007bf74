package softnic

import (
	"fmt"

	"github.com/coredag/coredag/exec/nic"
)

// armedWR is a send request armed on a QP (nic.TriggerQP): posted by cq.Poll once cq has
// returned after more completions and the requests armed before it are posted.
type armedWR struct {
	cq    *cq
	after int
	wr    nic.SendWR
}

// trigger is a QP's FIFO of armed requests and what it posted since Fired last looked.
type trigger struct {
	armed  []armedWR
	buf    []nic.SendWR // reused for posting
	posted int
	err    error
}

var _ nic.TriggerQP = (*qp)(nil)

// ArmSend appends wr to the QP's armed requests.
func (q *qp) ArmSend(c nic.CQ, after int, wr *nic.SendWR) error {
	w, ok := c.(*cq)
	switch {
	case !ok || w.ctx != q.ctx:
		return fmt.Errorf("softnic: %s: ArmSend on a CQ of another context or provider: %w", q, nic.ErrWrongContext)
	case after < 0:
		return fmt.Errorf("softnic: %s: ArmSend after %d completions: %w", q, after, nic.ErrBadRequest)
	case len(q.trig.armed) == nic.MaxArmed:
		return fmt.Errorf("softnic: %s: %d requests are armed already: %w", q, nic.MaxArmed, nic.ErrQueueFull)
	case q.closed || w.closed:
		return fmt.Errorf("softnic: %s: ArmSend on a closed QP or CQ: %w", q, nic.ErrClosed)
	}
	if !w.watchedBy(q) {
		w.watch = append(w.watch, q)
	}
	q.trig.armed = append(q.trig.armed, armedWR{cq: w, after: after, wr: *wr})
	return nil
}

// Fired reports the armed count and what was posted since the last call.
func (q *qp) Fired() (int, int, error) {
	t := &q.trig
	n, err := t.posted, t.err
	t.posted, t.err = 0, nil
	return len(t.armed), n, err
}

// Disarm drops the armed requests.
func (q *qp) Disarm() { q.trig.armed = q.trig.armed[:0] }

// fire counts the completions Poll returned (got) against the requests armed on the QPs that
// watch q: an error completion disarms those QPs; then each posts the run of armed requests at its
// head whose counts are reached.
func (q *cq) fire(got []nic.WC) {
	failed := false
	for i := range got {
		failed = failed || got[i].Status != nic.StatusSuccess
	}
	for _, p := range q.watch {
		t := &p.trig
		waits := false
		for i := range t.armed {
			if t.armed[i].cq == q {
				t.armed[i].after -= len(got)
				waits = true
			}
		}
		if failed {
			if waits {
				t.armed = t.armed[:0]
			}
			continue
		}
		k := 0
		for k < len(t.armed) && t.armed[k].after <= 0 {
			k++
		}
		if k == 0 {
			continue
		}
		t.buf = t.buf[:0]
		for _, a := range t.armed[:k] {
			t.buf = append(t.buf, a.wr)
		}
		n, err := p.PostSend(t.buf)
		t.posted += n
		if err != nil {
			t.err = err
			t.armed = t.armed[:0]
			continue
		}
		t.armed = append(t.armed[:0], t.armed[k:]...)
	}
}

func (q *cq) watchedBy(p *qp) bool {
	for _, x := range q.watch {
		if x == p {
			return true
		}
	}
	return false
}

func (q *cq) unwatch(p *qp) {
	for i, x := range q.watch {
		if x == p {
			q.watch = append(q.watch[:i], q.watch[i+1:]...)
			return
		}
	}
}
