//go:build ofi && linux

package main

import "testing"

// TestValidatePredictSockets is TestValidatePredict on libfabric's sockets provider (target
// triggered-sockets), each iteration timed by the CPU time of the thread that runs every rank and
// the fastest taken, as docs/predict.md's table was, with fewer iterations (20 and 10, not 50 and
// 30) so that each command stays within the tests' bound of 2 minutes on a loaded machine.
func TestValidatePredictSockets(t *testing.T) {
	endToEnd(t)
	validatePredict(t, ofiEnv, "ofi", 20, 10, []string{"--target", "triggered-sockets", "--clock", "cpu", "--stat", "min"})
}
