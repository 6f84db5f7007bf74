// Package msccl reads and writes MSCCL-IR, the XML of GPU collective algorithms that msccl-tools
// (MSCCLang) and the synthesizers built on it emit: <algo> holds <gpu>s (ranks), which hold <tb>s
// (threadblocks, each with a send and a receive peer and a channel), which hold <step>s.
//
// Reading is in two passes. Parse reads the XML into an Algo, keeping every element's line and
// column; Build (Convert does both) checks the algorithm (step types, buffers and bounds,
// dependencies, connections) and writes it as a .dag plan (a dsl.File): MSCCL's input, output
// and scratch buffers become plan buffers, each GPU pair and channel a queue, every received
// chunk a slot of its own, steps ops ordered by `after` (the order of their threadblock and their
// depid/deps), and the collective named by coll the plan's postcondition (an `expect`), so that
// `coredag check` proves the algorithm computes it. Diagnostics are positioned in the XML.
//
// Export goes the other way for the two-sided subset of a checked plan (send, recv, sum reduce,
// copy, nop): each rank's ops become threadblocks and steps.
//
// docs/msccl.md says what maps to what, and which step types and attributes are read.
package msccl
