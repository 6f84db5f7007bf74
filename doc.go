// Package coredag runs proven collective and pipeline plans on the application's own memory:
// a library for persistent collectives, as MPI 4's MPI_Allreduce_init/MPI_Start/MPI_Wait or
// UCC's collective init/post/test, whose plans are checked before their first start
// (matching, deadlocks, races, the postconditions of `expect`) and whose dependencies the
// NIC walks where it can (CORE-Direct WAIT/ENABLE chains, libfabric triggered operations).
//
// # Lifecycle
//
//	plan, err := coredag.Open("plans/ring_allreduce.dag", coredag.Options{Params: map[string]int64{"n": 1024}})
//	coll, err := plan.Init(ctx, world)        // join the world (all ranks agree on the plan)
//	err = coredag.BindSlice(coll, world.Rank(), "data", mySlice) // every extern buffer, once (re-binding allowed between starts)
//	for each step {
//	    ... write the inputs into the bound memory ...
//	    err = coll.Start()                    // returns at once (the first sets the queues up)
//	    ... compute that does not touch the bound memory ...
//	    err = coll.Wait(ctx)                  // or poll coll.Test()
//	    ... read the results ...
//	}
//	coll.Close(); plan.Close()
//
// With a nil World, which runs every rank in this process, bind each rank's memory:
// BindSlice(coll, r, "data", slices[r]) for r in 0..plan.Ranks()-1. Example (in example_test.go)
// is a whole program of that kind; docs/library.md is the guide, for Go and for C
// (cmd/libcoredag, coredag.h); docs/language.md describes plans, and plans/ holds a library of
// them.
//
// A plan that fails `coredag check` does not open: Open returns a *CheckError with the
// positioned diagnostics. Buffers declared `extern` in the plan are the caller's: they must be
// bound before the first Start. Every other buffer (scratch) is coredag's, allocated and
// registered by the first Start, which also registers the bound memory and connects the queues.
//
// # Plans by message size
//
// As MPI libraries switch algorithm by size, a plan set (a small file: which plan serves which
// message size and world size, as `coredag tune` writes one) picks the plan: OpenSet reads and
// checks it, Set.Open(size, ranks, opts) opens the plan for a message of size bytes, with its
// size param (n) worked out so that the plan's buffer holds the message.
//
// # Worlds
//
// A World is the caller's out-of-band runtime, as UCC's OOB interface: rank, size, an
// allgather and a barrier (an MPI program wraps MPI_Allgather and MPI_Barrier). Init uses it
// to agree that every rank runs the same plan, the first Start to exchange queue and memory
// descriptors, and later Starts, where the plan needs them, so that no peer's transfer of the
// next iteration reaches a rank before that rank started it. BootstrapWorld is
// a ready-made world over coredag's own TCP bootstrap, with the rank and size from the
// launcher's environment (mpirun, srun). A nil World runs every rank of the plan in this
// process on the software NIC: for tests, examples and single-node prototyping. Across hosts
// Init also finds the network that joins them, where libfabric's endpoints over IP bind
// (Options.OFIAddr chooses it where none does; docs/library.md, Ranks on several hosts).
//
// # The caller's contract
//
// The proofs hold for every input, provided the caller leaves bound memory alone between Start
// and the Wait (or Test) that reports the iteration done, and keeps it alive and bound while the
// Coll is open: memory freed or reused too early is not detected. Every rank calls Start as many
// times, in the same order over the plans it runs.
//
// # Concurrency
//
// Several Colls, of one plan or of several, may be open and in flight at once: each has its
// own device contexts, queues, completion queues and background goroutine, and they share
// nothing but the World. The World's calls of a start come from the goroutine that runs it (the
// Coll's background goroutine, or the caller's Wait), concurrently with the application's own
// calls and, with several Colls in flight, with each other: a World over MPI uses its own
// communicator (MPI_Comm_dup) and a library initialised with MPI_THREAD_MULTIPLE. A Coll is used
// by one goroutine at a time, except Close, which may be called from any goroutine, also while
// another waits.
//
// # Errors
//
// Every error can be tested with errors.Is against the sentinels ErrUnbound, ErrBusy,
// ErrClosed, ErrWorld, ErrTimeout, ErrBind, ErrProvider, ErrLimit and ErrArg, or with
// errors.As against *CheckError. No panic crosses the API: one inside coredag is recovered and
// returned as an error wrapping ErrInternal.
package coredag
