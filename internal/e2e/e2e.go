// Package e2e tells tests whether the slow cases run: under CI (CI set, as .ci/run does) or with
// COREDAG_E2E=1. A plain `go test ./...` skips them, or runs fewer random cases, so that it
// stays quick for a contributor on a small machine, while CI runs them all.
package e2e

import "os"

// Enabled reports whether the slow cases run: CI or COREDAG_E2E is set.
func Enabled() bool { return os.Getenv("CI") != "" || os.Getenv("COREDAG_E2E") != "" }

// Cases returns full when the slow cases run and quick otherwise: how many random cases a
// property test draws.
func Cases(full, quick int) int {
	if Enabled() {
		return full
	}
	return quick
}
