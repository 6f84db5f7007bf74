package softnic

import (
	"testing"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/nictest"
)

func nicEnd(e *end) nictest.End { return nictest.End{QP: e.qp, SCQ: e.scq, RCQ: e.rcq, MR: e.mr} }

func TestTrigger(t *testing.T) {
	a, b := pair(t, New(Options{NoCrossChannel: true}), allAccess, nic.QPConfig{})
	nictest.Trigger(t, nicEnd(a), nicEnd(b))
}

func TestTriggerDisarm(t *testing.T) {
	a, b := pair(t, New(Options{NoCrossChannel: true}), allAccess, nic.QPConfig{})
	nictest.TriggerDisarm(t, nicEnd(a), nicEnd(b))
}
