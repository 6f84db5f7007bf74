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
)

var builtinTargets = []Target{
	{
		Name:         "connectx",
		Description:  "cross-channel NIC (CORE-Direct), managed style: a management queue per rank walks the DAG with WAIT and ENABLE",
		CrossChannel: true,
		Style:        StyleManaged,
		PrePost:      true,
		MaxWQDepth:   connectXMaxWQ,
		MaxCQDepth:   connectXMaxCQ,
		MaxInline:    256,
		CanCalc:      true,
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
		CanCalc:      true,
	},
	{
		Name:         "generic",
		Description:  "any verbs NIC, no cross-channel: plain chains that the CPU polling engine posts as dependencies complete",
		CrossChannel: false,
		Style:        StyleNone,
		PrePost:      false,
		MaxWQDepth:   connectXMaxWQ,
		MaxCQDepth:   connectXMaxCQ,
		MaxInline:    64,
		CanCalc:      false,
	},
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
