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

// wordInitSrc: rank 1 adds 1 to a word of rank 0 that starts at 5, and rank 0 waits for 6.
const wordInitSrc = `plan word_init
param ranks = 2
buffer word u64[1] remote_atomic init 5
queue q to 1 - rank peer q
if rank == 1 {
  op bump = atomic add q word[0] 1
}
if rank == 0 {
  op got = wait word[0] >= 6
}
`

// TestOpWordStartsAtInit: in an Op, whose starts reset no buffer, a watched word starts at its
// init, as check proved its waits from (the word's buffer is never extern, so nobody else sets
// it); it then grows by its adds every start, on every engine.
func TestOpWordStartsAtInit(t *testing.T) {
	g, err := planner.Load(t.Context(), "word_init.dag", []byte(wordInitSrc), nil, planner.Options{})
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

// wordWrapSrc passes check, but its watched word wraps after a start of an Op: rank 1 adds 2^61
// to an i64 word of rank 0 that starts at 2^62, and rank 0 waits for it to pass its start. One
// iteration takes the word to 2^62 + 2^61, which check proves fits its type; Start resets no
// buffer, so the second takes it to 2^63, past the largest i64: it wraps to -2^63, and the
// wait, which the second start holds to 2^62 + 2^61 + 1, never completes.
const wordWrapSrc = `plan word_wrap
param ranks = 2
buffer word i64[1] remote_atomic init 4611686018427387904
queue q to 1 - rank peer q
if rank == 1 {
  op bump = atomic add q word[0] 2305843009213693952
}
if rank == 0 {
  op got = wait word[0] >= 4611686018427387905
}
`

// wordWrapU64File: the same on a u64 word that starts at 0, with adds of 2^62: three starts
// fit, the fourth would take it to 2^64, which wraps to 0.
const wordWrapU64File = "../testdata/onesided/word_wrap_u64.dag"

// wordEarlySrc is wordWrapSrc with a wait for the whole add: there the second start would
// hold the wait to 2^62 + 2^61 + 2^61 = 2^63, which wraps to -2^63 as its threshold does, so
// that the wait would complete at once, before the add it waits for has landed.
var wordEarlySrc = strings.Replace(wordWrapSrc, ">= 4611686018427387905", ">= 6917529027641081856", 1)

// TestOpRefusesWordWrap: an Op never resets a buffer, so the word a wait watches grows by the
// atomic adds of every start. The start whose adds would take it past its type's largest value
// (wrapping it, so that the wait would hang or complete too early) is refused before it runs,
// naming the word, the wait and the iteration; the starts before it run, on every engine.
// Run, which resets the memory before every iteration, runs as many as it likes.
func TestOpRefusesWordWrap(t *testing.T) {
	wordWrapU64Src, err := os.ReadFile(wordWrapU64File)
	require.NoError(t, err)
	cases := []struct {
		name, src string
		fit       int
		msg       string
	}{
		{"i64", wordWrapSrc, 1, "start: 2 iterations would wrap word on rank 0, the word that wait got watches: it starts at 4611686018427387904, the atomic adds into it raise it by 2305843009213693952 per iteration and nothing resets it between iterations, so iteration 2 (counting from 1) would take it past 9223372036854775807, the largest i64, and the wait would hang or complete too early: only the first iteration fits"},
		{"i64-early", wordEarlySrc, 1, "start: 2 iterations would wrap word on rank 0"},
		{"u64", string(wordWrapU64Src), 3, "start: 4 iterations would wrap word on rank 0, the word that wait got watches: it starts at 0, the atomic adds into it raise it by 4611686018427387904 per iteration and nothing resets it between iterations, so iteration 4 (counting from 1) would take it past 18446744073709551615, the largest u64, and the wait would hang or complete too early: at most 3 iterations fit"},
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
