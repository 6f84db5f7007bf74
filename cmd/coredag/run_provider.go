package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/coredag/coredag/exec/bootstrap"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/provider"
	"github.com/coredag/coredag/ir"
)

// providerConfig is how --provider's NIC is opened for rank (-1: every rank here) with a
// schedule seed, for plan g: the provider is asked for the ordering g relies on, and for
// atomics only after the ordering when g has none.
func (c *runCmd) providerConfig(g *ir.Graph, rank int, seed uint64) provider.Config {
	cfg := provider.Config{Rank: rank, Seeded: seed != 0, Seed: seed, OFIProvider: c.OFIProv, OFIAddr: c.OFIAddr, Device: c.Device, GIDIndex: c.GIDIndex, Ranks: g.Ranks,
		NoAtomics: !g.HasAtomics()}
	if g.Relies != nil {
		cfg.Order = uint64(g.Relies.Order)
	}
	return cfg
}

// perProcess reports whether this process runs one rank of the plan: always for a provider
// that cannot run them all here (verbs), and for one that can do both (ofi) when --rank,
// --ranks or --bootstrap was given.
func (c *runCmd) perProcess(prov provider.Entry) bool {
	return !prov.AllRanks || prov.PerProcess && (c.Rank >= 0 || c.NumRanks >= 0 || c.Bootstrap != "")
}

// checkProvider refuses what the provider cannot do, before anything is loaded.
func (c *runCmd) checkProvider(prov provider.Entry) error {
	if prov.Check != nil {
		return usageError("--provider %s: %v", prov.Name, prov.Check)
	}
	if !prov.Device && (c.Device != "" || c.GIDIndex >= 0) {
		return usageError("--device and --gid-index are for --provider verbs")
	}
	if !prov.PerProcess && (c.Rank >= 0 || c.NumRanks >= 0 || c.Bootstrap != "") {
		return usageError("--rank, --ranks and --bootstrap run one rank per process: --provider %s runs every rank in this process (set the world size with -p ranks=N)", prov.Name)
	}
	if c.OFIAddr != "" && !prov.Loopback {
		return usageError("--ofi-addr is for --provider ofi")
	}
	if prov.Loopback && c.Bootstrap != "" && c.OFIAddr == "" {
		// A bootstrap on loopback keeps the endpoints there (127.0.0.1); one elsewhere may join
		// ranks on several hosts, whose endpoints then bind the address on which this host
		// reaches rank 0's.
		host, _, err := net.SplitHostPort(c.Bootstrap)
		if err != nil {
			return usageError("--bootstrap %s: %v", c.Bootstrap, err)
		}
		ip := net.ParseIP(host)
		switch {
		case ip != nil && ip.IsLoopback() && ip.To4() != nil:
		case ip != nil && ip.IsUnspecified():
			return usageError("--bootstrap %s: give rank 0's address, which the other ranks dial (127.0.0.1:PORT when every rank runs on this host)", c.Bootstrap)
		default:
			if c.OFIAddr, err = bootstrap.LocalAddr(c.Bootstrap); err != nil {
				return usageError("--bootstrap %s: %v: give 127.0.0.1:PORT when every rank runs on this host, or --ofi-addr", c.Bootstrap, err)
			}
		}
	}
	return nil
}

// openProvider opens the provider for a run of every rank in this process; a failure is
// reported on stderr.
func (c *runCmd) openProvider(e *env, prov provider.Entry, g *ir.Graph, rank int, seed uint64) (nic.Provider, error) {
	p, err := prov.Open(c.providerConfig(g, rank, seed))
	if err != nil {
		fmt.Fprintf(e.stderr, "coredag: --provider %s: %s\n", prov.Name, strings.TrimPrefix(err.Error(), prov.Name+": "))
		return nil, &exitError{code: exitFail}
	}
	return p, nil
}
