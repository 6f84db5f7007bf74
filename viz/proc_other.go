//go:build !unix

package viz

import "os/exec"

// ownGroup: without Unix process groups, cancelling kills dot itself only.
func ownGroup(cmd *exec.Cmd) {}
