//go:build !race

// Package race tells tests whether the race detector is on: it multiplies allocations and time,
// so bounds on them that prove a limit fires early hold only without it.
package race

// Enabled reports whether the binary was built with the race detector.
const Enabled = false
