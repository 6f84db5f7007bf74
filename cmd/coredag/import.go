package main

import (
	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/msccl"
)

func init() {
	register("import", "Convert another tool's algorithm format to a .dag plan.", func() any { return &importCmd{} })
}

type importCmd struct {
	MSCCL importMSCCLCmd `cmd:"" name:"msccl" help:"Convert an MSCCL-IR .xml algorithm (msccl-tools, SCCL, TACCL...) to a formatted .dag plan."`
}

type importMSCCLCmd struct {
	Type string `name:"msccl-type" default:"f32" placeholder:"TYPE" help:"Element type of the buffers (u8 i32 u32 i64 u64 f32 f64)."`
	Out  string `short:"o" placeholder:"FILE" help:"Write the plan to FILE (default: stdout)."`
	File string `arg:"" name:"file" help:"MSCCL-IR algorithm (.xml, - for stdin)."`
}

func (c *importMSCCLCmd) Run(e *env) error {
	if c.Out != "" {
		if err := checkOutput(e, "-o", c.Out, c.File); err != nil {
			return err
		}
	}
	src, err := readSource(e, c.File)
	if err != nil {
		return err
	}
	name := c.File
	if name == "-" {
		name = "<stdin>"
	}
	f, err := msccl.Convert(name, src, msccl.Options{Elem: c.Type, Import: true})
	if err != nil {
		diag.Print(e.stderr, err, diag.Sources{name: src})
		return &exitError{code: exitFail}
	}
	out := dsl.Format(f)
	if c.Out == "" {
		_, err := e.stdout.Write(out)
		return err
	}
	return writeOutput(c.Out, "the plan", out)
}
