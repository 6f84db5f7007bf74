package nic

import "time"

// epoch is the origin of Now.
var epoch = time.Now()

// Now reads the clock that engines and drivers share: nanoseconds on the monotonic clock since
// the package was initialised. Drivers that stamp completions (StampCQ) express WC.Time on it, and
// engines compare those stamps with their own readings of Now.
func Now() int64 { return int64(time.Since(epoch)) }
