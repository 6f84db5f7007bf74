package exec_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/planner"
)

// readPlan is the text of the plan testdata/onesided/NAME.dag.
func readPlan(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile("../testdata/onesided/" + name + ".dag")
	require.NoError(t, err)
	return string(src)
}

// TestOpWordStartsAtInit: in an Op, whose starts reset no buffer, a watched word starts at its
// init, as check proved its waits from (the word's buffer is never extern, so nobody else sets
// it); it then grows by its adds every start, on every engine.
func TestOpWordStartsAtInit(t *testing.T) {
	g, err := planner.Load(t.Context(), "word_init.dag", []byte(readPlan(t, "word_init")), nil, planner.Options{})
	require.NoError(t, err, "the plan passes check")
	for _, c := range engineCases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := compileFor(g, c.target)
			require.NoError(t, err)
			nic := softnic.New(softnic.Options{NoCrossChannel: !c.cross, Triggers: c.trig})
			op, err := exec.NewOp(plan, nic, exec.Options{Engine: c.engine, HangTimeout: 2 * time.Second})
			require.NoError(t, err)
			defer op.Close()
			for i := range 3 {
				require.NoError(t, op.Start(), "start %d", i+1)
				require.NoError(t, op.Wait(context.Background()), "start %d", i+1)
				word, ok := exec.BufferByName(g, "word")
				require.True(t, ok)
				require.Equal(t, uint64(6+i), op.MemoryForTest().Elem(0, word, 0), "the word after start %d", i+1)
			}
		})
	}
}

// TestOpRefusesWordWrap: an Op never resets a buffer, so the word a wait watches grows by the
// atomic adds of every start. The start whose adds would take it past its type's largest value
// (wrapping it, so that the wait would hang or complete too early) is refused before it runs,
// naming the word, the wait and the iteration; the starts before it run, on every engine.
// Run, which resets the memory before every iteration, runs as many as it likes.
func TestOpRefusesWordWrap(t *testing.T) {
	// word_wrap: an i64 word from 2^62, adds of 2^61: only the first start fits. The early
	// variant waits for the whole add: there the second start would hold the wait to
	// 2^62 + 2^61 + 2^61 = 2^63, which wraps to -2^63 as its threshold does, so that the wait
	// would complete at once, before the add it waits for has landed. word_wrap_u64: a u64 word
	// from 0, adds of 2^62: three starts fit, the fourth would take it to 2^64, which wraps to 0.
	wrap := readPlan(t, "word_wrap")
	early := strings.Replace(wrap, ">= 4611686018427387905", ">= 6917529027641081856", 1)
	cases := []struct {
		name, src string
		fit       int
		msg       string
	}{
		{"i64", wrap, 1, "start: 2 iterations would wrap word on rank 0, the word that wait got watches: it starts at 4611686018427387904, the atomic adds into it raise it by 2305843009213693952 per iteration and nothing resets it between iterations, so iteration 2 (counting from 1) would take it past 9223372036854775807, the largest i64, and the wait would hang or complete too early: only the first iteration fits"},
		{"i64-early", early, 1, "start: 2 iterations would wrap word on rank 0"},
		{"u64", readPlan(t, "word_wrap_u64"), 3, "start: 4 iterations would wrap word on rank 0, the word that wait got watches: it starts at 0, the atomic adds into it raise it by 4611686018427387904 per iteration and nothing resets it between iterations, so iteration 4 (counting from 1) would take it past 18446744073709551615, the largest u64, and the wait would hang or complete too early: at most 3 iterations fit"},
	}
	for _, tc := range cases {
		g, err := planner.Load(t.Context(), tc.name+".dag", []byte(tc.src), nil, planner.Options{})
		require.NoError(t, err, "the plan passes check")
		for _, c := range engineCases {
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				plan, err := compileFor(g, c.target)
				require.NoError(t, err)
				nic := softnic.New(softnic.Options{NoCrossChannel: !c.cross, Triggers: c.trig})
				op, err := exec.NewOp(plan, nic, exec.Options{Engine: c.engine, HangTimeout: 2 * time.Second})
				require.NoError(t, err)
				defer op.Close()
				for i := range tc.fit {
					require.NoError(t, op.Start(), "start %d", i+1)
					require.NoError(t, op.Wait(context.Background()), "start %d", i+1)
				}
				err = op.Start()
				if err == nil {
					err = op.Wait(context.Background())
					var h *exec.HangError
					if errors.As(err, &h) {
						t.Fatalf("start %d was let run, and its wait hung on the wrapped word: %v", tc.fit+1, err)
					}
					t.Fatalf("start %d was let run, though it wraps the word: its Wait says %v", tc.fit+1, err)
				}
				assert.Contains(t, err.Error(), tc.msg)
				assert.Equal(t, tc.fit, op.Starts())
				require.Error(t, op.Start(), "a refused start is refused again")

				res, err := exec.Run(context.Background(), plan, softnic.New(softnic.Options{NoCrossChannel: !c.cross, Triggers: c.trig}),
					exec.Options{Engine: c.engine, Iters: 4 * (tc.fit + 1), HangTimeout: 2 * time.Second})
				require.NoError(t, err, "Run resets the word before every iteration")
				assert.True(t, res.OK, res.Summary())
			})
		}
	}
}
