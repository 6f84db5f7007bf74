package nic

// HostProgress is implemented by contexts whose NIC moves data only inside the host's calls into
// it (libfabric's FI_PROGRESS_MANUAL: no progress thread). Polling a CQ makes progress; while an
// engine waits for something else, such as a barrier between processes, it calls DriveProgress
// now and then, so that the peers' operations on this rank's memory (RDMA reads, atomics, writes
// they wait to complete) go on.
type HostProgress interface {
	// DriveProgress moves pending data without reading completions.
	DriveProgress() error
}
