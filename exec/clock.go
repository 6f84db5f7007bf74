package exec

import "time"

// epoch is the origin of Now.
var epoch = time.Now()

// Now reads exec's clock: nanoseconds on the monotonic clock since the package was initialised.
// Drivers that stamp completions (StampCQ) express WC.Time on it.
func Now() int64 { return int64(time.Since(epoch)) }
