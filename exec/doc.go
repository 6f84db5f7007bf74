// Package exec runs compiled plans on a NIC. It holds the serial reference interpreter
// (Reference), the two engines that drive a provider of package exec/nic (the offload engine,
// which posts the compiled WQE chains with their WAIT/ENABLE entries and lets the NIC walk them,
// and the polling engine, which walks the dependency graph on the CPU), and the statistics of a
// run. The NIC contract itself lives in exec/nic, which depends on nothing here.
//
// Op is the persistent form for library use (package coredag): one iteration per Start on the
// memory as the caller left it, in the background, without reset or comparison; extern buffers
// are the caller's memory (Options.Bound, Session.Rebind).
//
// Every run is checked against the reference: a Graph executed serially in a topological order
// gives the one correct final memory of a valid (race-free) plan, and Memory.Diff says in words
// where a run's memory differs from it.
package exec
