// Package nic is the contract between coredag's engines (package exec) and the NICs they drive.
// The engines are written against these interfaces only; a NIC plugs in by implementing them, the
// way exec/softnic (the in-process software NIC) and exec/verbs (libibverbs devices) do. The
// package holds no engine and no plan: it depends on the standard library alone, so a provider
// can be built, tested and reused without the compiler or the engines.
//
// The vocabulary is that of libibverbs, plus the CORE-Direct cross-channel entries CQE_WAIT,
// SEND_EN and RECV_EN: a Provider opens one Context per rank; a Context gives protection domains
// (PD), memory regions (MR), completion queues (CQ) and reliable-connected queue pairs (QP); a QP
// takes batches of work requests (SendWR, RecvWR) and a CQ hands back work completions (WC).
//
// # What every provider implements
//
// Provider, Context, PD, MR, CQ and QP, with these rules, which internal/nictest checks on every
// provider:
//
//   - Each work queue is FIFO. A QP's send queue executes its requests in posting order, and its
//     receive queue consumes its receives in posting order; completions of one work queue come
//     out of its CQ in the same order.
//   - A signalled send request, and every receive, produces exactly one WC; an unsignalled request
//     produces one only if it fails. A signalled completion tells the engine that every earlier
//     request of its queue is done, and frees their slots (QPConfig.SendDepth).
//   - PostSend and PostRecv post a prefix of their batch and say how long it is; errors found at
//     post time are errors (ErrQueueFull, ErrBadRequest, ... wrapped with details), errors found
//     when a request executes are completions with an error Status. After an error completion
//     the QP is in the error state: its later requests, and those still queued, complete with
//     StatusFlushError.
//   - CQ.Poll never blocks. Posting and polling take caller-owned slices of plain values and
//     must not allocate: the engines call them in their hot loops.
//   - Objects belong to the Context that created them and may only be combined with objects of
//     the same Context (ErrWrongContext). Close releases an object; using it afterwards fails
//     with ErrClosed.
//   - A Context and the objects created from it are used by one goroutine at a time; whether a
//     Provider may open contexts concurrently is the provider's to document.
//   - Caps tells the truth: an engine picks its strategy from it (cross-channel or not, inline
//     limit, depths, triggers) before it creates anything.
//
// Connection set-up is the caller's business: QP.Info is a plain value (QPInfo) to hand to the
// peer, by any means, before QP.Connect; MR.Remote likewise (RemoteMR).
//
// # What is optional
//
// A provider may implement more, and the engines use it when it is there:
//
//   - Progresser: a software fabric that moves only when asked, and can say why it is stalled
//     (Stall). The engines then detect a hang at once instead of after a timeout. A CQNotifier
//     also lists the CQs that have completions, so the offload engine polls only those.
//   - TriggerQP, HoldCQ, SpinCQ: a driver that posts armed requests inside CQ.Poll, keeps polling
//     past completions the engine does not need at once, or spins on a CQ by itself.
//   - StampCQ: completions stamped with the time their poll found them, on this package's clock
//     (Now), for timelines.
//   - FaultExplainer, StatsReporter: words for a failed request; counters of what the NIC did.
//   - TriggerContext (Caps.Counters): completion counters and triggered work, the model of
//     libfabric's fi_cntr and FI_TRIGGER. A counter is bound to CQs (one CQ per work queue, so a
//     binding names one endpoint side: send completions, or receives including notify-write
//     arrivals); work (a send or receive request, or counter-add/counter-set) is queued with a
//     counter and a threshold and fires once the counter reaches it. Work on one counter fires in
//     threshold order, equal thresholds in submission order; nothing else is ordered. A libfabric
//     provider maps CreateCounter to fi_cntr_open, BindCounter to fi_ep_bind with FI_SEND/FI_RECV
//     (or FI_REMOTE_WRITE), Trigger to an operation with FI_TRIGGER and a threshold condition or to
//     fi_control(FI_QUEUE_WORK) for counter work, and CancelTriggers to FI_FLUSH_WORK.
//   - HostMemory: registered memory allocated in this process, so a run's memory budget counts
//     it exactly.
//
// Cross-channel opcodes (OpCQEWait, OpSendEnable, OpRecvEnable) and managed queues are part of
// the contract but need Caps.CrossChannel; a provider without it rejects them at post or create
// time with ErrNoCrossChannel.
package nic
