//go:build unix

package viz

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own and makes its cancellation kill the whole
// group: a dot that is a wrapper script (or runs filters) leaves no child running when it is
// stopped at a deadline or because the caller was interrupted.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
