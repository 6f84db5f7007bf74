//go:build ofi && linux

package main

import "testing"

// TestValidatePredictSockets is TestValidatePredict on libfabric's sockets provider (target
// triggered-sockets), each iteration timed by the CPU time of the thread that runs every rank and
// the fastest taken, as docs/predict.md's table was: about 3 minutes of a loaded machine.
func TestValidatePredictSockets(t *testing.T) {
	endToEnd(t)
	validatePredict(t, ofiEnv, "ofi", []string{"--target", "triggered-sockets", "--clock", "cpu", "--stat", "min"})
}
