package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/ofi"
)

// ofiOptions are the libfabric options of `coredag run --provider ofi`: the provider
// --ofi-provider names (default: the first with triggered operations), on loopback.
func (c *runCmd) ofiOptions() ofi.Options {
	o := ofi.DefaultOptions()
	o.Provider = c.OFIProv
	return o
}

// ofiPerProcess reports whether --provider ofi runs one rank per process: --rank, --ranks or
// --bootstrap was given.
func (c *runCmd) ofiPerProcess() bool { return c.Rank >= 0 || c.NumRanks >= 0 || c.Bootstrap != "" }

// checkOFI refuses what --provider ofi cannot do, before anything is loaded.
func (c *runCmd) checkOFI() error {
	if !ofi.Available {
		return usageError("--provider ofi: %v", ofi.ErrNotBuilt)
	}
	if c.Device != "" || c.GIDIndex >= 0 {
		return usageError("--device and --gid-index are for --provider verbs")
	}
	if c.Bootstrap != "" {
		// libfabric traffic stays on loopback (endpoints bind 127.0.0.1), so does the bootstrap.
		host, _, err := net.SplitHostPort(c.Bootstrap)
		if err != nil {
			return usageError("--bootstrap %s: %v", c.Bootstrap, err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() || ip.To4() == nil {
			return usageError("--bootstrap %s: --provider ofi runs on loopback only: give 127.0.0.1:PORT", c.Bootstrap)
		}
	}
	return nil
}

// runOFIPerProcess runs this process's rank on libfabric; the ranks exchange endpoint addresses
// (fi_getname) and memory keys through the bootstrap. The provider is opened first, so that the
// engine is chosen from what it grants (--engine auto: the offload engine on triggered operations
// only where libfabric has FI_TRIGGER, else the poll engine).
func (c *runCmd) runOFIPerProcess(e *env) error {
	p, err := c.openOFI(e)
	if err != nil {
		return err
	}
	defer p.(interface{ Close() error }).Close()
	return c.runPerProcess(e, "ofi", p.Caps(), func(int) (nic.Provider, error) { return p, nil })
}

// openOFI opens the libfabric provider for a run of every rank in this process.
func (c *runCmd) openOFI(e *env) (nic.Provider, error) {
	p, err := ofi.New(c.ofiOptions())
	if err != nil {
		fmt.Fprintf(e.stderr, "--provider ofi: %s\n", strings.TrimPrefix(err.Error(), "ofi: "))
		return nil, &exitError{code: exitFail}
	}
	return p, nil
}
