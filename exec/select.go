package exec

import (
	"errors"
	"fmt"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/ir"
)

// Why an engine, a target and a NIC do not go together; a *SelectError wraps one of them, or
// nic.ErrNoCrossChannel when the target or the engine needs cross-channel and the NIC lacks it.
var (
	ErrUnknownEngine = errors.New("unknown engine")
	ErrUnknownTarget = errors.New("unknown target")
	// ErrNeedsCrossChannelTarget: the offload engine runs WAIT/ENABLE chains, which only a
	// cross-channel target's plans have.
	ErrNeedsCrossChannelTarget = errors.New("the offload engine needs a cross-channel target")
	// ErrNeedsGenericTarget: the poll engine walks the dependencies itself and runs plans for a
	// target without cross-channel.
	ErrNeedsGenericTarget = errors.New("the poll engine needs a target without cross-channel")
	// ErrOrder: the NIC does not grant the ordering between the ops of a queue that the plan's
	// race-freedom relies on (ir.Graph.Relies, nic.Caps.Order).
	ErrOrder = errors.New("the NIC does not grant the message ordering the plan relies on")
)

// SelectError says why Select (or Prepare, for the plan's target) refused an engine, a target
// and a NIC together. It is a usage error: the caller asked for something that cannot run.
type SelectError struct {
	Engine Engine // the engine asked for (Auto when left to choose)
	Target string // the target's name ("" when none was found)
	Err    error  // ErrUnknownEngine, ErrUnknownTarget, ErrNeedsCrossChannelTarget, ErrNeedsGenericTarget, ErrOrder or nic.ErrNoCrossChannel
	msg    string
}

func (e *SelectError) Error() string { return e.msg }

// Unwrap returns Err, for errors.Is.
func (e *SelectError) Unwrap() error { return e.Err }

// DefaultTarget is the target Select compiles for when none is named: connectx for the offload
// engine, generic for the poll engine, and for Auto connectx on a NIC with cross-channel,
// generic on one without.
func DefaultTarget(e Engine, caps nic.Caps) string {
	switch {
	case e == Offload, e == Auto && caps.CrossChannel:
		return "connectx"
	}
	return "generic"
}

// Select decides, in one place, which engine runs and which target a plan is compiled for: the
// named target (DefaultTarget when target is ""), and engine e, or for Auto the offload engine
// when the target and the NIC (caps) have cross-channel, else the poll engine. The engine
// returned is never Auto. Prepare applies the same rules to a compiled plan's target. Errors are
// *SelectError.
func Select(e Engine, target string, caps nic.Caps) (Engine, ir.Target, error) {
	if target == "" {
		target = DefaultTarget(e, caps)
	}
	t, err := ir.LookupTarget(target)
	if err != nil {
		return e, ir.Target{}, &SelectError{Engine: e, Err: ErrUnknownTarget, msg: err.Error()}
	}
	engine, err := engineFor(e, t, caps)
	return engine, t, err
}

// engineFor resolves e for plans of target t on a NIC with caps.
func engineFor(e Engine, t ir.Target, caps nic.Caps) (Engine, error) {
	fail := func(err error, format string, args ...any) (Engine, error) {
		return e, &SelectError{Engine: e, Target: t.Name, Err: err, msg: fmt.Sprintf(format, args...)}
	}
	offloadable := t.CrossChannel && t.Style != ir.StyleNone
	if t.Trigger != nil && caps.Counters && (e == Auto || e == Offload) {
		// Triggered plans: the offload engine hands each iteration's triggered work to the NIC.
		return Offload, nil
	}
	switch e {
	case Auto:
		if !t.CrossChannel {
			return Poll, nil
		}
		if !caps.CrossChannel {
			return fail(nic.ErrNoCrossChannel, "target %s has WAIT/ENABLE chains, which need cross-channel (CORE-Direct) support that this NIC lacks (compile for generic: the poll engine runs its plans)", t.Name)
		}
		if !offloadable {
			return fail(ErrNeedsCrossChannelTarget, "target %s has cross-channel but no WAIT/ENABLE style: neither engine runs its plans", t.Name)
		}
		return Offload, nil
	case Poll:
		if t.CrossChannel {
			return fail(ErrNeedsGenericTarget, "the poll engine walks the DAG itself and runs plans compiled for a target without cross-channel; target %s has WAIT/ENABLE chains for the offload engine (compile for generic)", t.Name)
		}
		return Poll, nil
	case Offload:
		if t.Trigger != nil {
			// Counters are what the triggered branch above needs: without them say so, not that
			// the target lacks cross-channel.
			return fail(nic.ErrProviderLimited, "target %s runs on triggered operations (completion counters and thresholds), which this NIC lacks (libfabric: no FI_TRIGGER); use the poll engine (the engine auto picks it)", t.Name)
		}
		if !offloadable {
			return fail(ErrNeedsCrossChannelTarget, "the offload engine needs a plan compiled for a cross-channel target; target %s has none (compile for connectx or connectx-inline, or use the poll engine)", t.Name)
		}
		if !caps.CrossChannel {
			return fail(nic.ErrNoCrossChannel, "the offload engine needs cross-channel (CORE-Direct) support, which this NIC lacks: %v (use the poll engine)", nic.ErrNoCrossChannel)
		}
		return Offload, nil
	}
	return fail(ErrUnknownEngine, "unknown engine %v", e)
}

// CheckOrder refuses a NIC (caps) that does not grant the ordering between the ops of a queue
// that plan's race-freedom relies on (ir.Graph.Relies), naming the orderings it lacks, the ops
// that need them and the race each would let happen. A plan that relies on none, or a NIC that
// does not say what it grants (nic.OrderKnown unset), is never refused. Prepare and NewOp call
// it; the error is a *SelectError wrapping ErrOrder.
func CheckOrder(plan *ir.Plan, caps nic.Caps) error {
	rl := plan.Graph.Relies
	if rl == nil || caps.Order&nic.OrderKnown == 0 {
		return nil
	}
	grants := ir.Order(caps.Order &^ nic.OrderKnown)
	lack := rl.Order &^ grants
	if lack == ir.OrderNone {
		return nil
	}
	missing := &ir.Reliance{Order: lack}
	for _, u := range rl.Uses {
		if u.Order&lack != 0 {
			missing.Uses = append(missing.Uses, u)
		}
	}
	return &SelectError{Target: plan.Target.Name, Err: ErrOrder, msg: fmt.Sprintf(
		"plan %s relies on %s between the ops of a queue, which this NIC does not grant (its msg_order is %s): %s. "+
			"Run it on a provider that grants %s, or order the ops with a message so that the plan relies on no ordering (coredag check --target unordered shows where)",
		plan.Graph.Name, lack.Describe(), grants, missing.Explain(plan.Graph), lack)}
}
