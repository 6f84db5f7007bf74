package ir

import (
	"fmt"
	"iter"
	"math/bits"
	"strings"
)

// Order is a set of message orderings a transport guarantees between two ops posted one after
// the other on the send side of one queue: that the later op's data lands after the earlier
// op's. The bits are libfabric's FI_ORDER_* message-ordering bits, with the same values, so a
// provider's msg_order can be compared with a target's Order directly. "X after Y" names the
// later op's class first: OrderSAW orders a send after an earlier write.
//
// The classes of the ops (OrderClass): a send is a send (S), a write (notified or not) a write
// (W), a read a read (R). An atomic both reads and writes the peer's memory, and is ordered only
// when both its classes are: on RC verbs a later op may overtake an atomic as it may a read.
type Order uint64

// The orderings, FI_ORDER_RAR to FI_ORDER_SAS.
const (
	OrderRAR Order = 1 << iota // read after read
	OrderRAW                   // read after write
	OrderRAS                   // read after send
	OrderWAR                   // write after read
	OrderWAW                   // write after write
	OrderWAS                   // write after send
	OrderSAR                   // send after read
	OrderSAW                   // send after write
	OrderSAS                   // send after send

	// OrderNone guarantees nothing: ops of one queue may land in any order (reliable unordered
	// delivery).
	OrderNone Order = 0
	// OrderStrict is every ordering (FI_ORDER_STRICT).
	OrderStrict = OrderRAR | OrderRAW | OrderRAS | OrderWAR | OrderWAW | OrderWAS | OrderSAR | OrderSAW | OrderSAS
	// OrderRC is what an InfiniBand/RoCE reliable-connected queue guarantees without fences (the
	// IBTA ordering rules, and libfabric's verbs provider's msg_order): sends and writes land in
	// order, and a read or atomic executes after the sends and writes before it; but a later send
	// or write may land before an earlier read or atomic has read its data (an RDMA read is
	// re-executed when its response is lost; only IBV_SEND_FENCE holds a request back), so there
	// is no write-after-read or send-after-read.
	OrderRC = OrderRAR | OrderRAW | OrderRAS | OrderWAW | OrderWAS | OrderSAW | OrderSAS
)

// OrderClass is the class of an op for ordering: a set of OrderRead, OrderWrite and OrderSend.
type OrderClass uint8

// The classes of ops.
const (
	OrderRead OrderClass = 1 << iota
	OrderWrite
	OrderSend
)

// Class is the class of an op of kind k for ordering (0 for ops that are not on a queue's send
// side).
func (k OpKind) Class() OrderClass {
	switch k {
	case OpSend:
		return OrderSend
	case OpWrite:
		return OrderWrite
	case OpRead:
		return OrderRead
	case OpAtomicAdd, OpAtomicCAS:
		return OrderRead | OrderWrite
	}
	return 0
}

// Between is the ordering that orders the landing of an op of class next after that of an
// earlier op of class prev on one queue side: every bit "n after p" for n in next and p in prev
// (OrderNone when either class is empty, and then nothing orders them).
func Between(prev, next OrderClass) Order {
	var o Order
	for n := range 3 {
		for p := range 3 {
			if next&(1<<n) != 0 && prev&(1<<p) != 0 {
				o |= 1 << (3*n + p)
			}
		}
	}
	return o
}

// Orders reports whether o orders the landing of an op of kind next after that of an earlier op
// of kind prev on the same queue side.
func (o Order) Orders(prev, next OpKind) bool {
	need := Between(prev.Class(), next.Class())
	return need != 0 && o&need == need
}

var orderNames = [...]string{"read-after-read", "read-after-write", "read-after-send", "write-after-read",
	"write-after-write", "write-after-send", "send-after-read", "send-after-write", "send-after-send"}

// Short is the orderings in o as libfabric's suffixes ("SAW WAW"), or "none".
func (o Order) Short() string {
	if o&OrderStrict == 0 {
		return "none"
	}
	var s []string
	for b := range o.each() {
		s = append(s, libfabricName(b)[len("FI_ORDER_"):])
	}
	return strings.Join(s, " ")
}

// String is the orderings in o as libfabric's names joined by | ("FI_ORDER_SAW|FI_ORDER_WAW"),
// or "FI_ORDER_NONE".
func (o Order) String() string {
	if o&OrderStrict == 0 {
		return "FI_ORDER_NONE"
	}
	var s []string
	for b := range o.each() {
		s = append(s, libfabricName(b))
	}
	return strings.Join(s, "|")
}

// Describe words the orderings in o for a message: "send-after-write ordering (FI_ORDER_SAW)",
// "write-after-write and send-after-write ordering (FI_ORDER_WAW, FI_ORDER_SAW)".
func (o Order) Describe() string {
	var words, names []string
	for b := range o.each() {
		words = append(words, orderNames[b])
		names = append(names, libfabricName(b))
	}
	if len(words) == 0 {
		return "no ordering"
	}
	w := strings.Join(words, ", ")
	if n := len(words); n > 1 {
		w = strings.Join(words[:n-1], ", ") + " and " + words[n-1]
	}
	return w + " ordering (" + strings.Join(names, ", ") + ")"
}

// each yields the bit numbers of the orderings in o, in libfabric's order.
func (o Order) each() iter.Seq[int] {
	return func(yield func(int) bool) {
		for v := uint64(o & OrderStrict); v != 0; v &= v - 1 {
			if !yield(bits.TrailingZeros64(v)) {
				return
			}
		}
	}
}

func libfabricName(bit int) string {
	return "FI_ORDER_" + [...]string{"RAR", "RAW", "RAS", "WAR", "WAW", "WAS", "SAR", "SAW", "SAS"}[bit]
}

// Reliance is the ordering between the ops of a queue that a plan's race-freedom relies on, as
// the race check found it (planner/verify): a smallest set of the orderings of the target it was
// proven under such that, without any one of them, a race comes back. A plan that relies on
// none has no Reliance (Graph.Relies is nil) and runs on any transport.
type Reliance struct {
	Order Order      // the orderings relied on
	Uses  []OrderUse // where, one per ordering of Order, in libfabric's order
}

// OrderUse is one ordering a plan relies on: two ops posted one after the other on one queue,
// whose landings it orders, and the race that comes back without it.
type OrderUse struct {
	Order      Order // one FI_ORDER_* bit
	Prev, Next OpID  // Next's data lands after Prev's (Next may be None when no pair was found)
	Race       string
}

// Explain words where the plan g relies on r's orderings, for a message: for each, the ops that
// need it and the race without it, separated by "; ".
func (r *Reliance) Explain(g *Graph) string {
	var b strings.Builder
	for i, u := range r.Uses {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(libfabricName(bits.TrailingZeros64(uint64(u.Order))))
		if u.Prev != None && u.Next != None {
			p, n := &g.Ops[u.Prev], &g.Ops[u.Next]
			q := &g.Queues[p.Queue]
			fmt.Fprintf(&b, " orders %s %s (%s) after %s %s (%s) on queue %s of rank %d", n.Kind, n.Name, n.Pos, p.Kind, p.Name, p.Pos, q.Name, p.Rank)
		}
		if u.Race != "" {
			b.WriteString(": without it, ")
			b.WriteString(u.Race)
		}
	}
	return b.String()
}
