package coredag

import (
	"context"
	"sync"
	"time"
)

// worldCtx is the context of the World calls a start makes in the background: it expires the
// hang timeout after arm unless disarmed first, or when the Coll closes. Arming re-uses one
// timer, so a start that goes well allocates nothing (context.WithTimeout would allocate a timer
// and a context per call). Once expired or closed it stays so: the start fails, and the Coll
// with it.
type worldCtx struct {
	hang  time.Duration
	timer *time.Timer
	done  chan struct{}

	mu       sync.Mutex
	err      error
	deadline time.Time
}

func (w *worldCtx) init(hang time.Duration) {
	w.hang = hang
	w.done = make(chan struct{})
	w.timer = time.AfterFunc(time.Hour, func() { w.end(context.DeadlineExceeded) })
	w.timer.Stop()
}

// arm starts the hang timeout of one World call.
func (w *worldCtx) arm() {
	w.mu.Lock()
	w.deadline = time.Now().Add(w.hang)
	w.mu.Unlock()
	w.timer.Reset(w.hang)
}

// disarm stops it.
func (w *worldCtx) disarm() {
	w.timer.Stop()
	w.mu.Lock()
	w.deadline = time.Time{}
	w.mu.Unlock()
}

// close ends the context for good (the Coll closes).
func (w *worldCtx) close() {
	if w.done != nil {
		w.timer.Stop()
		w.end(context.Canceled)
	}
}

func (w *worldCtx) end(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
		close(w.done)
	}
}

func (w *worldCtx) Deadline() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deadline, !w.deadline.IsZero()
}

func (w *worldCtx) Done() <-chan struct{} { return w.done }

func (w *worldCtx) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *worldCtx) Value(any) any { return nil }
