// Package wait is the WAIT/ENABLE model of CORE-Direct chains, shared by the planner that emits
// the chains and by every engine, NIC model and checker that runs or replays them:
//
//   - the conditions: Cond, a CQE_WAIT's (or a host step's) "CQ has produced Count completions",
//     and Enable, a SEND_EN's or RECV_EN's "the managed work queue may run WQEs [0, UpTo)";
//   - their re-arm rule: both are written for iteration 0, and iteration i of a persistent plan
//     adds i times the per-iteration completions of the CQ (Cond.At) or WQEs of the queue
//     (Enable.At), wrapping like the hardware's producer indices;
//   - the tests a NIC applies: Satisfied (a CQ's count against a WAIT's) and Enabled (a WQE's
//     index against a queue's enable index), and Raise, how enable indices move;
//   - the cyclic arithmetic under them: the 24-bit CQ and 16-bit work queue index spaces
//     (Space), which also bound what one iteration may post (Space.Check).
//
// Counts are cumulative over a queue's life and wrap: a CQ's producer index is 24 bits wide and a
// work queue's 16 bits. Two indices are compared cyclically: a reaches b when the distance from b
// forward to a is less than half the index space. This stays correct for ever, provided no chain
// ever has more than half the space outstanding (lowering checks it with Space.Check).
//
// The package is a leaf: it imports nothing of the project, and ir imports it. A plan's
// condition, ir.Cond, is a Cond together with the graph op its count stands for, and a WQE
// carries its Enable; the op is attribution for diagnostics, not part of the model, and keeping
// it out lets the NIC contract and the software NIC, which must not know the IR, use the same
// tests as the planner and the replay checker. (The other direction, wait importing ir to own
// ir.Cond whole, would put the model above the plan and out of the NIC models' reach.)
package wait
