package msccl_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/coredag/coredag/msccl"
	"github.com/coredag/coredag/planner"
)

// FuzzConvert: any input gives a plan or positioned diagnostics, never a panic; a plan it gives
// loads (or is refused with diagnostics) and exports without a panic.
func FuzzConvert(f *testing.F) {
	files, _ := filepath.Glob("../testdata/msccl/*.xml")
	for _, file := range files {
		if src, err := os.ReadFile(file); err == nil {
			f.Add(src)
		}
	}
	f.Add(ringAllreduce(3, 1).xml())
	f.Add(allpairsAllreduce(3).xml())
	f.Add(ringReduceScatter(3, false).xml())
	f.Add(ringAllgather(3, true).xml())
	f.Fuzz(func(t *testing.T, src []byte) {
		if _, err := msccl.Convert("f.xml", src, msccl.Options{}); err != nil {
			return
		}
		g, err := planner.Load(t.Context(), "f.xml", src, map[string]int64{"chunk": 1}, planner.Options{})
		if err != nil {
			return
		}
		_, _ = msccl.Export(g, msccl.ExportOptions{})
	})
}
