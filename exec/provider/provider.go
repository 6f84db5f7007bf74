// Package provider is the table of NIC providers, in the spirit of database/sql's drivers: a
// name maps to what the provider can do (every rank in one process, one rank per process,
// seeded schedules) and how to open it. Commands and the library look providers up here by
// name instead of comparing strings; a provider's Close (part of nic.Provider) releases it.
//
// The table is fixed at build time: the software NIC always, libfabric (ofi) and verbs in every
// build, whose Check says whether the build has them (build tags ofi and verbs).
package provider

import (
	"fmt"
	"slices"
	"strings"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/ofi"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/exec/verbs"
)

// Config is how to open a provider; each provider reads the fields it knows.
type Config struct {
	// Rank is the rank this process runs when it runs one (-1: every rank of the plan).
	Rank int
	// Seeded, Seed: the software NIC's schedule seed (Entry.Seeded).
	Seeded bool
	Seed   uint64
	// OFIProvider is the libfabric provider of ofi ("": the first offering triggered ops and RMA).
	OFIProvider string
	// OFIAddr is where ofi's endpoints over IP bind: an IPv4 address or an interface of this host
	// ("": 127.0.0.1, every rank on this host; ofi.Options.Addr).
	OFIAddr string
	// Device and GIDIndex pick the verbs device and its GID ("" and -1: the defaults).
	Device   string
	GIDIndex int
	// Order is the ordering between the ops of a queue the plan relies on (libfabric's msg_order
	// bits, ir.Graph.Relies): ofi asks the provider for it besides what coredag needs, since some
	// grant an ordering only when asked. The runtime refuses a provider that does not grant it.
	Order uint64
	// NoAtomics: the plan posts no remote atomics (ir.Graph.HasAtomics is false), so ofi asks for
	// Order before atomics, which some providers (tcp;ofi_rxm) do not grant together.
	NoAtomics bool
	// Ranks is the plan's world size (0: unknown): ofi sizes libfabric's universe by it.
	Ranks int
}

// Entry is one provider of the table.
type Entry struct {
	Name string
	// AllRanks: every rank of a plan can run in one process.
	AllRanks bool
	// PerProcess: one rank per process can run, connected to the others through an exchange.
	PerProcess bool
	// Seeded: the schedule can be seeded (different seeds explore different interleavings) and
	// a hang is diagnosed at once (the software NIC).
	Seeded bool
	// Loopback: its endpoints live on the loopback interface unless Config.OFIAddr names another
	// address; so does a bootstrap then.
	Loopback bool
	// Device: it runs on a named RDMA device (Config.Device, GIDIndex).
	Device bool
	// Check is nil when this build has the provider, else the error that says how to get it.
	Check error
	// Caps is what engine selection may assume of the provider before it is open (the exact
	// caps come with Open).
	Caps func(Config) nic.Caps
	// Open opens the provider; Close it (nic.Provider.Close) when done.
	Open func(Config) (nic.Provider, error)
}

// table lists every provider, the default first.
var table = []Entry{
	{
		Name: "softnic", AllRanks: true, Seeded: true,
		Caps: func(Config) nic.Caps { return softnic.New(softnic.Options{}).Caps() },
		Open: func(c Config) (nic.Provider, error) {
			return softnic.New(softnic.Options{Seeded: c.Seeded, Seed: c.Seed}), nil
		},
	},
	{
		Name: "ofi", AllRanks: true, PerProcess: true, Loopback: true, Check: notBuilt(ofi.Available, ofi.ErrNotBuilt),
		// Counters and triggered operations: the default provider has them; a named one without
		// them is refused by the engine when the run starts.
		Caps: func(Config) nic.Caps { return nic.Caps{Counters: true} },
		Open: func(c Config) (nic.Provider, error) {
			o := ofi.DefaultOptions()
			o.Provider = c.OFIProvider
			o.Addr = c.OFIAddr
			o.Order |= c.Order
			o.NoAtomics = c.NoAtomics
			o.Ranks = c.Ranks
			return ofi.New(o)
		},
	},
	{
		Name: "verbs", PerProcess: true, Device: true, Check: notBuilt(verbs.Available, verbs.ErrNotBuilt),
		// exec/verbs drives upstream rdma-core, which has no cross-channel: engine selection
		// decides for a NIC without it (the engine checks the device's own caps again).
		Caps: func(Config) nic.Caps { return nic.Caps{} },
		Open: func(c Config) (nic.Provider, error) {
			o := verbs.DefaultOptions()
			o.Device, o.GIDIndex = c.Device, c.GIDIndex
			if c.Rank >= 0 {
				o.Ranks = []int{c.Rank}
			}
			return verbs.New(o)
		},
	},
}

func notBuilt(available bool, err error) error {
	if available {
		return nil
	}
	return err
}

// Names lists the providers, the default first.
func Names() []string {
	out := make([]string, len(table))
	for i, e := range table {
		out[i] = e.Name
	}
	return out
}

// Lookup finds a provider by name ("" is the default, softnic).
func Lookup(name string) (Entry, error) {
	if name == "" {
		return table[0], nil
	}
	i := slices.IndexFunc(table, func(e Entry) bool { return e.Name == name })
	if i < 0 {
		return Entry{}, fmt.Errorf("unknown provider %q (use %s)", name, strings.Join(Names(), ", "))
	}
	return table[i], nil
}

// Usable is Lookup, then Check: an error when the provider is unknown or not in this build.
func Usable(name string) (Entry, error) {
	e, err := Lookup(name)
	if err == nil && e.Check != nil {
		err = fmt.Errorf("provider %s: %w", e.Name, e.Check)
	}
	return e, err
}
