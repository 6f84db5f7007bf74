package ir

import (
	"fmt"
	"sort"
	"strings"
)

// Hardware limits used by the built-in targets. ConnectX-class NICs accept work queues of up to
// 2^15 WQEs and CQs of up to 2^22 CQEs; the 16-bit WQ index must stay unambiguous under cyclic
// comparison, so a chain may use at most half of the index space per iteration.
const (
	connectXMaxWQ = 1 << 15
	connectXMaxCQ = 1 << 22
	// connectXMaxSGE is the max_send_sge and max_recv_sge ConnectX-class NICs report. The
	// triggered and triggered-cxi targets use it too: the software NIC's default, and a guess for
	// cxi (no documented figure).
	connectXMaxSGE = 30
	// socketsMaxIOV is the iov_limit of the libfabric sockets provider's endpoints.
	socketsMaxIOV = 8
)

// Triggered-operation profiles (libfabric FI_TRIGGER with fi_cntr completion counters).
var (
	// triggeredModel is the model the software NIC implements: no budget but a 48-bit counter.
	triggeredModel = TriggerProfile{Provider: "model", CounterWorkCost: 1, MaxCounter: 1<<48 - 1,
		Source: "coredag's own model (exec/softnic); the 48-bit counter range is chosen to match cxi"}
	// cxiProfile: Slingshot cxi. Receives are not deferrable except at threshold 0 (posted up
	// front; arrivals counted by counters); 504 outstanding triggered operations per service ID,
	// shared by the local processes using it, and counter work costs two of them. The counter
	// range (48 bits) and the counters per rank (2048) are guesses, not documented figures.
	cxiProfile = TriggerProfile{Provider: "cxi", MaxOutstanding: 504, CounterWorkCost: 2, RecvThresholdZero: true,
		MaxCounters: 2048, MaxCounter: 1<<48 - 1, Guesses: FigMaxCounters | FigMaxCounter,
		Source: "Slingshot cxi: 504 triggered ops per service ID (shared by local processes: the budget is per rank here, assuming one rank per service ID), counter work costs 2, triggered receives only at threshold 0; MaxCounters 2048 and the 48-bit counter are guesses"}
	// socketsProfile: the libfabric sockets provider keeps deferred work in host memory lists and
	// counters as 64-bit software values; it documents no limit. The 4096 outstanding operations
	// and 1024 counters are guesses chosen as a safe budget, not provider figures.
	socketsProfile = TriggerProfile{Provider: "sockets", MaxOutstanding: 4096, CounterWorkCost: 1, MaxCounters: 1024,
		MaxCounter: 1<<31 - 1, Guesses: FigMaxOutstanding | FigMaxCounters,
		Source: "libfabric sockets: software counters and deferred-work lists; a counter holds 32 bits and its triggers compare as int (libfabric 1.17: past 2^31-1 a read comes back negative and every threshold fires), so a run ends before a counter passes 2^31-1; MaxOutstanding 4096 and MaxCounters 1024 are guesses"}
)

// The sources of the targets' orderings.
const (
	rcOrderSource = "InfiniBand/RoCE RC (IBTA ordering rules; libfabric verbs msg_order): sends and writes land in order, and reads and atomics after them; a later op may overtake a read or atomic unless fenced"
	// orderCXI is the cxi provider's msg_order (CXIP_MSG_ORDER in libfabric's source): send after
	// send and write after write, no order between sends and RMA. Its RMA- and atomic-only bits
	// are not modelled.
	orderCXI       = OrderSAS | OrderWAW
	cxiOrderSource = "the cxi provider's msg_order (libfabric source, CXIP_MSG_ORDER: FI_ORDER_SAS, FI_ORDER_WAW); a guess that the data of the earlier write is in place when the later op lands (max_order_waw_size not documented)"
)

// genericTarget is any verbs NIC without cross-channel; unorderedTarget is the same NIC on a
// transport that keeps no order between the ops of a queue.
var genericTarget = Target{
	Name:         "generic",
	Description:  "any verbs NIC, no cross-channel: plain chains that the CPU polling engine posts as dependencies complete",
	CrossChannel: false,
	Style:        StyleNone,
	PrePost:      false,
	MaxWQDepth:   connectXMaxWQ,
	MaxCQDepth:   connectXMaxCQ,
	MaxInline:    64,
	MaxSGE:       connectXMaxSGE,
	CanCalc:      false,
	Order:        OrderRC,
	OrderSource:  rcOrderSource,
}

var unorderedTarget = func() Target {
	t := genericTarget
	t.Name = "unordered"
	t.Description = "generic, on a transport that delivers reliably but in no order (Ultra Ethernet-style reliable unordered delivery): a plan that checks for it relies on no ordering between the ops of a queue"
	t.Order = OrderNone
	t.OrderSource = "reliable unordered delivery: the ops of a queue may land in any order"
	return t
}()

var builtinTargets = []Target{
	{
		Name:        "triggered",
		Description: "triggered operations (libfabric FI_TRIGGER model): completion counters and thresholds, counter-add joins; the software NIC runs it",
		Style:       StyleNone, PrePost: true,
		MaxWQDepth: connectXMaxWQ, MaxCQDepth: connectXMaxCQ, MaxInline: 64, MaxSGE: connectXMaxSGE,
		Trigger: &triggeredModel,
		Order:   OrderRC, OrderSource: "the software NIC (exec/softnic), which runs each queue in order with the RC rules, fences included",
	},
	{
		Name:        "triggered-cxi",
		Description: "triggered operations on Slingshot cxi: receives only at threshold 0, 504 outstanding triggered ops, counter work costs 2",
		Style:       StyleNone, PrePost: true,
		MaxWQDepth: connectXMaxWQ, MaxCQDepth: connectXMaxCQ, MaxInline: 64, MaxSGE: connectXMaxSGE,
		Trigger: &cxiProfile,
		Order:   orderCXI, OrderSource: cxiOrderSource,
	},
	{
		Name:        "triggered-sockets",
		Description: "triggered operations on the libfabric sockets provider (software counters; budgets are guesses)",
		Style:       StyleNone, PrePost: true,
		MaxWQDepth: connectXMaxWQ, MaxCQDepth: connectXMaxCQ, MaxInline: 64, MaxSGE: socketsMaxIOV,
		Trigger: &socketsProfile,
		Order:   OrderStrict, OrderSource: "fi_info -p sockets: msg_order FI_ORDER_STRICT (all nine), max_order_*_size unbounded",
	},
	{
		Name:         "connectx",
		Description:  "cross-channel NIC (CORE-Direct), managed style: a management queue per rank walks the DAG with WAIT and ENABLE",
		CrossChannel: true,
		Style:        StyleManaged,
		PrePost:      true,
		MaxWQDepth:   connectXMaxWQ,
		MaxCQDepth:   connectXMaxCQ,
		MaxInline:    256,
		MaxSGE:       connectXMaxSGE,
		CanCalc:      true,
		Order:        OrderRC,
		OrderSource:  rcOrderSource,
	},
	{
		Name:         "connectx-inline",
		Description:  "cross-channel NIC (CORE-Direct), inline style: WAITs in the data send queues, dependent receive queues enabled from them",
		CrossChannel: true,
		Style:        StyleInline,
		PrePost:      true,
		MaxWQDepth:   connectXMaxWQ,
		MaxCQDepth:   connectXMaxCQ,
		MaxInline:    256,
		MaxSGE:       connectXMaxSGE,
		CanCalc:      true,
		Order:        OrderRC,
		OrderSource:  rcOrderSource,
	},
	genericTarget,
	unorderedTarget,
}

// Targets returns the built-in targets, sorted by name. The slice is a copy.
func Targets() []Target {
	out := append([]Target(nil), builtinTargets...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupTarget returns the built-in target called name. The error lists the known names.
func LookupTarget(name string) (Target, error) {
	for _, t := range builtinTargets {
		if t.Name == name {
			return t, nil
		}
	}
	names := make([]string, 0, len(builtinTargets))
	for _, t := range Targets() {
		names = append(names, t.Name)
	}
	return Target{}, fmt.Errorf("unknown target %q (known targets: %s; `coredag targets` describes them)", name, strings.Join(names, ", "))
}
