package main

import (
	"fmt"
	"math/bits"
	"strings"
	"text/tabwriter"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/listing"
)

func init() {
	register("targets", "List the compile targets and their capabilities.", func() any { return &targetsCmd{} })
}

type targetsCmd struct {
	JSON bool `help:"Print the targets as JSON."`
}

// targetJSON is one target in `coredag targets --json`.
type targetJSON struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	CrossChannel bool   `json:"cross_channel"`
	Style        string `json:"style"`
	PrePost      bool   `json:"pre_post"`
	MaxWQDepth   int    `json:"max_wq_depth"`
	MaxCQDepth   int    `json:"max_cq_depth"`
	MaxInline    int    `json:"max_inline"`
	MaxSGE       int    `json:"max_sge"`
	CanCalc      bool   `json:"can_calc"`
	// Trigger is the trigger profile of a triggered target (docs/compile-json.md).
	Trigger *listing.TriggerProfileJSON `json:"trigger,omitempty"`
	// Order is what the target guarantees between the landings of consecutive ops of one
	// queue: libfabric's FI_ORDER_* names (empty: none), its msg_order bits, and where the figure
	// comes from.
	Order       []string `json:"order"`
	OrderBits   uint64   `json:"order_bits"`
	OrderSource string   `json:"order_source"`
}

func (c *targetsCmd) Run(e *env) error {
	ts := ir.Targets()
	if c.JSON {
		out := make([]targetJSON, len(ts))
		for i, t := range ts {
			order := []string{}
			if t.Order != ir.OrderNone {
				order = strings.Split(t.Order.String(), "|")
			}
			out[i] = targetJSON{t.Name, t.Description, t.CrossChannel, t.Style.String(), t.PrePost, t.MaxWQDepth, t.MaxCQDepth, t.MaxInline, t.MaxSGE, t.CanCalc,
				listing.NewTriggerProfileJSON(t.Trigger), order, uint64(t.Order), t.OrderSource}
		}
		return writeJSON(e.stdout, out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tCROSS-CHANNEL\tSTYLE\tPRE-POST\tMAX WQ\tMAX CQ\tINLINE\tSGE\tCALC\tORDER (FI_ORDER_*)")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d B\t%d\t%s\t%s\n", t.Name, yesNo(t.CrossChannel), t.Style, yesNo(t.PrePost), t.MaxWQDepth, t.MaxCQDepth, t.MaxInline, t.MaxSGE, yesNo(t.CanCalc), t.Order.Short())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeTriggerProfiles(e, ts); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	for _, t := range ts {
		fmt.Fprintf(e.stdout, "%s: %s\n", t.Name, t.Description)
		if t.Trigger != nil {
			fmt.Fprintf(e.stdout, "  figures: %s\n", t.Trigger.Source)
		}
		fmt.Fprintf(e.stdout, "  order: %s; from %s\n", t.Order.Short(), t.OrderSource)
	}
	return nil
}

// writeTriggerProfiles prints the budgets of the triggered targets, the figures that are guesses
// marked with an asterisk.
func writeTriggerProfiles(e *env, ts []ir.Target) error {
	fmt.Fprintln(e.stdout)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRIGGERED TARGET\tPROVIDER\tMAX OUTSTANDING\tCOUNTER WORK COST\tMAX COUNTERS\tCOUNTER BITS\tRECV AT THRESHOLD 0 ONLY")
	guesses := false
	for _, t := range ts {
		p := t.Trigger
		if p == nil {
			continue
		}
		fig := func(f ir.Figure, n uint64) string {
			s := "no limit"
			if n > 0 {
				s = fmt.Sprint(n)
			}
			if p.Guess(f) {
				s += "*"
				guesses = true
			}
			return s
		}
		bits := fmt.Sprintf("%d (max %d)", bits.Len64(p.MaxCounter), p.MaxCounter)
		if p.Guess(ir.FigMaxCounter) {
			bits += "*"
			guesses = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, p.Provider, fig(ir.FigMaxOutstanding, uint64(p.MaxOutstanding)),
			fig(ir.FigCounterWorkCost, uint64(p.WorkCost())), fig(ir.FigMaxCounters, uint64(p.MaxCounters)), bits, yesNo(p.RecvThresholdZero))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if guesses {
		fmt.Fprintln(e.stdout, "* a guess, not a documented provider figure (each profile's figures line says where its figures come from)")
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
