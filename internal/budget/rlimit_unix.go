//go:build unix

package budget

import "syscall"

// addressLimit returns the soft RLIMIT_AS (ulimit -v) in bytes (a huge figure when unlimited),
// or 0 when it cannot be read.
func addressLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &r); err != nil {
		return 0
	}
	return r.Cur
}
