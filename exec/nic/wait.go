package nic

import "time"

// Blocker is implemented by providers whose CQs can put the calling thread to sleep in the kernel
// until one of them may have a completion (libfabric's file-descriptor wait objects). An engine
// with nothing to do blocks there after a short spin instead of polling on, so processes that
// share cores leave them to the peers that have work. A provider whose CQs have no wait object
// does not implement it, or returns nil from WaitSet; engines then poll as before.
type Blocker interface {
	// WaitSet returns a wait set on cqs, all of this provider, or nil if some of them cannot
	// block (no wait object): the caller then polls.
	WaitSet(cqs []CQ) WaitSet
}

// WaitSet blocks until a CQ of its set may have a completion to poll.
type WaitSet interface {
	// Wait blocks until a CQ of the set may have a completion, or progress for the caller's polls
	// to make, or d passed, whichever comes first. It may return early; the caller polls after
	// it either way. It reports false, at once, when the provider says the CQs must be polled
	// before it is safe to block (libfabric's fi_trywait answered FI_EAGAIN, or requests wait on
	// the provider's side for a poll to hand them over). An error means waiting is broken; the
	// caller may go on polling.
	Wait(d time.Duration) (blocked bool, err error)
}
