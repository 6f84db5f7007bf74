package softnic

import (
	"fmt"
	"sort"

	"github.com/coredag/coredag/exec/nic"
)

// counter is a completion counter with the triggered work waiting on it, sorted by threshold
// (stable: equal thresholds keep submission order).
type counter struct {
	ctx    *Context
	val    uint64
	pend   []pendingWork
	closed bool
}

type pendingWork struct {
	thr uint64
	w   nic.TriggeredWR
}

var (
	_ nic.TriggerContext       = (*Context)(nil)
	_ nic.RMAEventContext      = (*Context)(nil)
	_ nic.RegistrationCounting = (*Context)(nil)
	_ nic.Counter              = (*counter)(nil)
)

func (c *counter) Value() uint64 { return c.val }

func (c *counter) Add(v uint64) error {
	if c.closed {
		return fmt.Errorf("softnic: rank %d: Add on a closed counter: %w", c.ctx.rank, nic.ErrClosed)
	}
	c.val += v
	c.ctx.nic.fireDue()
	return nil
}

func (c *counter) Set(v uint64) error {
	if c.closed {
		return fmt.Errorf("softnic: rank %d: Set on a closed counter: %w", c.ctx.rank, nic.ErrClosed)
	}
	c.val = v
	c.ctx.nic.fireDue()
	return nil
}

func (c *counter) Close() error {
	c.closed = true
	return nil
}

func (c *counter) due() bool { return len(c.pend) > 0 && c.pend[0].thr <= c.val }

// CreateCounter creates a counter at 0.
func (c *Context) CreateCounter() (nic.Counter, error) {
	if c.closed {
		return nil, fmt.Errorf("softnic: rank %d: CreateCounter on a closed context: %w", c.rank, nic.ErrClosed)
	}
	k := &counter{ctx: c}
	c.cntrs = append(c.cntrs, k)
	return k, nil
}

func (c *Context) own(x nic.Counter) (*counter, error) {
	k, ok := x.(*counter)
	if !ok || k.ctx != c {
		return nil, fmt.Errorf("softnic: rank %d: a counter of another context or provider: %w", c.rank, nic.ErrWrongContext)
	}
	if k.closed {
		return nil, fmt.Errorf("softnic: rank %d: closed counter: %w", c.rank, nic.ErrClosed)
	}
	return k, nil
}

// BindCounter makes every completion of q raise x.
func (c *Context) BindCounter(x nic.Counter, q nic.CQ) error {
	k, err := c.own(x)
	if err != nil {
		return err
	}
	w, ok := q.(*cq)
	if !ok || w.ctx != c {
		return fmt.Errorf("softnic: rank %d: BindCounter to a CQ of another context: %w", c.rank, nic.ErrWrongContext)
	}
	w.cntrs = append(w.cntrs, k)
	return nil
}

// Trigger queues w until x reaches threshold.
func (c *Context) Trigger(x nic.Counter, threshold uint64, w *nic.TriggeredWR) error {
	k, err := c.own(x)
	if err != nil {
		return err
	}
	switch w.Kind {
	case nic.TrigSend, nic.TrigRecv:
		q, ok := w.QP.(*qp)
		if !ok || q.ctx != c {
			return fmt.Errorf("softnic: rank %d: triggered work on a QP of another context: %w", c.rank, nic.ErrWrongContext)
		}
	case nic.TrigAdd, nic.TrigSet:
		if _, err := c.own(w.Target); err != nil {
			return err
		}
	default:
		return fmt.Errorf("softnic: rank %d: triggered work of kind %d: %w", c.rank, w.Kind, nic.ErrBadRequest)
	}
	i := sort.Search(len(k.pend), func(i int) bool { return k.pend[i].thr > threshold })
	k.pend = append(k.pend, pendingWork{})
	copy(k.pend[i+1:], k.pend[i:])
	k.pend[i] = pendingWork{thr: threshold, w: *w}
	c.npend++
	c.nic.npend++
	c.nic.fireDue()
	return nil
}

// PendingTriggers is how much triggered work waits on the context's counters.
func (c *Context) PendingTriggers() int { return c.npend }

// CancelTriggers drops every waiting triggered work of the context.
func (c *Context) CancelTriggers() int {
	n := c.npend
	for _, k := range c.cntrs {
		k.pend = nil
	}
	c.nic.npend -= n
	c.npend = 0
	return n
}

// TriggerErr is the posting error that stopped the context's triggered work.
func (c *Context) TriggerErr() error { return c.trigErr }

// fireDue runs due triggered work of every context until none is due, and returns how much ran.
func (n *NIC) fireDue() int {
	fired := 0
	if n.npend == 0 { // the common case, and without it every Poll would visit every context
		return 0
	}
	for again := true; again; {
		again = false
		for _, c := range n.ctxs {
			if c == nil || c.trigErr != nil {
				continue
			}
			for _, k := range c.cntrs {
				for k.due() && c.trigErr == nil {
					p := k.pend[0]
					k.pend = k.pend[1:]
					c.npend--
					n.npend--
					c.fire(&p.w)
					fired++
					again = true
				}
			}
		}
	}
	return fired
}

func (c *Context) fire(w *nic.TriggeredWR) {
	var err error
	switch w.Kind {
	case nic.TrigSend:
		_, err = w.QP.PostSend([]nic.SendWR{w.Send})
	case nic.TrigRecv:
		_, err = w.QP.PostRecv([]nic.RecvWR{w.Recv})
	case nic.TrigAdd:
		w.Target.(*counter).val += w.Value
	case nic.TrigSet:
		w.Target.(*counter).val = w.Value
	}
	if err != nil {
		c.trigErr = err
		c.CancelTriggers()
	}
}

// counted raises the counters bound to q by one completion.
func (q *cq) counted() {
	for _, k := range q.cntrs {
		k.val++
	}
}

// BindRemoteWrites makes every RDMA write that lands within bytes [off, off+n) of region x raise
// counter c by one, as libfabric's FI_RMA_EVENT does for a counter bound to a region.
func (c *Context) BindRemoteWrites(x nic.Counter, region nic.MR, off, n uint64) error {
	k, err := c.own(x)
	if err != nil {
		return err
	}
	m, ok := region.(*mr)
	if !ok || m.pd.ctx != c {
		return fmt.Errorf("softnic: rank %d: BindRemoteWrites on a region of another context: %w", c.rank, nic.ErrWrongContext)
	}
	if off > uint64(len(m.buf)) || n > uint64(len(m.buf))-off {
		return fmt.Errorf("softnic: rank %d: BindRemoteWrites on bytes [%d, %d) of a region of %d bytes: %w", c.rank, off, off+n, len(m.buf), nic.ErrBadRequest)
	}
	if c.nic.opts.CountPerRegistration && (off != 0 || n != uint64(len(m.buf))) {
		return fmt.Errorf("softnic: rank %d: counting per registration, bytes [%d, %d) of a region of %d bytes cannot be counted: %w", c.rank, off, off+n, len(m.buf), nic.ErrProviderLimited)
	}
	m.writes = append(m.writes, writeCounter{c: k, off: off, n: n})
	return nil
}

// landed raises the counters bound to the part of m that a remote write of n bytes at off
// filled.
func (m *mr) landed(off, n uint64) {
	fire := false
	for _, w := range m.writes {
		if off >= w.off && off+n <= w.off+w.n && !w.c.closed {
			w.c.val++
			fire = true
		}
	}
	if fire {
		m.pd.ctx.nic.fireDue()
	}
}

// CountsPerRegistration reports Options.CountPerRegistration (nic.RegistrationCounting).
func (c *Context) CountsPerRegistration() bool { return c.nic.opts.CountPerRegistration }
