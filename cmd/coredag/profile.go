package main

import (
	"fmt"
	"runtime"
	"runtime/pprof"

	"github.com/coredag/coredag/internal/atomicfile"
)

// profiles starts the profiles the global flags ask for and returns what ends them: the CPU
// profile covers the command, the heap profile is taken at its end (after a collection, as
// `go test -memprofile` does). Both are written atomically: a profile that cannot be finished
// leaves nothing behind.
func (c *cli) profiles() (stop func() error, err error) {
	for _, p := range []string{c.CPUProfile, c.MemProfile} {
		if p != "" {
			if err := atomicfile.Check(p); err != nil {
				return nil, usageError("%v", err)
			}
		}
	}
	var cpu *atomicfile.File
	if c.CPUProfile != "" {
		if cpu, err = atomicfile.Create(c.CPUProfile); err != nil {
			return nil, usageError("--cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			cpu.Abort()
			return nil, usageError("--cpuprofile: %v", err)
		}
	}
	return func() error {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Commit(); err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
		}
		if c.MemProfile == "" {
			return nil
		}
		runtime.GC()
		mem, err := atomicfile.Create(c.MemProfile)
		if err != nil {
			return fmt.Errorf("--memprofile: %w", err)
		}
		if err := pprof.WriteHeapProfile(mem); err != nil {
			mem.Abort()
			return fmt.Errorf("--memprofile: %w", err)
		}
		if err := mem.Commit(); err != nil {
			return fmt.Errorf("--memprofile: %w", err)
		}
		return nil
	}, nil
}
