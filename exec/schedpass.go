package exec

import (
	"runtime"
	"time"
)

// rescheduleEvery is how often a goroutine that runs iterations passes through the Go
// scheduler (schedPass).
const rescheduleEvery = 5 * time.Millisecond

// schedPass makes the goroutine that runs iterations yield to the Go scheduler
// (runtime.Gosched) once every rescheduleEvery: between the starts a caller runs inline (Op)
// and within an engine's rounds (stallWatch), since an iteration of a long vector runs for tens
// of milliseconds. A goroutine that runs them from C (a cgo callback's goroutine) never passes
// through the scheduler by itself; one that stays on one scheduler tick for 10 ms has its P
// taken by the runtime's monitor (sysmon) at the next cgo call it catches, which then keeps
// the monitor waking every 20 µs for a millisecond or more: thousands of wakeups a second per
// process, CPU taken from the peers where processes outnumber cores.
type schedPass struct{ last time.Time }

// at yields when the goroutine has not been through the scheduler for rescheduleEvery before
// now, and reports whether it did.
func (p *schedPass) at(now time.Time) bool {
	if now.Sub(p.last) < rescheduleEvery {
		return false
	}
	runtime.Gosched()
	p.last = time.Now()
	return true
}
