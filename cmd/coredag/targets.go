package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/coredag/coredag/ir"
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
	CanCalc      bool   `json:"can_calc"`
}

func (c *targetsCmd) Run(e *env) error {
	ts := ir.Targets()
	if c.JSON {
		out := make([]targetJSON, len(ts))
		for i, t := range ts {
			out[i] = targetJSON{t.Name, t.Description, t.CrossChannel, t.Style.String(), t.PrePost, t.MaxWQDepth, t.MaxCQDepth, t.MaxInline, t.CanCalc}
		}
		return writeJSON(e.stdout, out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tCROSS-CHANNEL\tSTYLE\tPRE-POST\tMAX WQ\tMAX CQ\tINLINE\tCALC")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d B\t%s\n", t.Name, yesNo(t.CrossChannel), t.Style, yesNo(t.PrePost), t.MaxWQDepth, t.MaxCQDepth, t.MaxInline, yesNo(t.CanCalc))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	for _, t := range ts {
		fmt.Fprintf(e.stdout, "%s: %s\n", t.Name, t.Description)
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
