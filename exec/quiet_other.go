//go:build !linux

package exec

// quietOtherThreads does nothing outside Linux, where nice values are per process.
func quietOtherThreads() (restore func()) { return func() {} }
