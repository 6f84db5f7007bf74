package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/coredag/coredag/internal/atomicfile"
)

// profiles starts the profiles the global flags ask for and returns what ends them: the CPU
// profile covers the command, the heap profile is taken at its end (after a collection, as
// `go test -memprofile` does). Both are written atomically: a profile that cannot be finished
// leaves nothing behind.
//
// A profile replaces only an earlier profile (or an empty file): a flag whose value is a plan,
// as in `--cpuprofile plans/*.dag` or a forgotten file name, must not turn an input into gzip.
func (c *cli) profiles() (stop func() error, err error) {
	for _, f := range []struct{ flag, path string }{{"--cpuprofile", c.CPUProfile}, {"--memprofile", c.MemProfile}} {
		if f.path == "" {
			continue
		}
		if err := atomicfile.Check(f.path); err != nil {
			return nil, usageError("%s %v", f.flag, err)
		}
		if !replaceable(f.path) {
			return nil, usageError("%s %s: the file exists and is not a profile: give the profile a file name of its own", f.flag, f.path)
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

// replaceable says whether a profile may be written to path: nothing is there, or a device
// (/dev/null), or an empty file, or a profile (gzip-compressed, as pprof writes them).
func replaceable(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return true // nothing there (atomicfile.Check vetted the directory)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return err == nil
	}
	var magic [2]byte
	n, _ := io.ReadFull(f, magic[:])
	return n == 0 || magic == [2]byte{0x1f, 0x8b}
}
