package elaborate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/race"
	"github.com/coredag/coredag/msccl"
)

// recursionInLoop calls a recursive def of 2^(depth+1)-1 calls (65535 at 15, within MaxCalls) on
// every pass of a loop of passes passes (within MaxIterations): each limit holds, their product
// took hours.
func recursionInLoop(passes, depth int) string {
	return fmt.Sprintf(`plan x
param ranks = 1
def f(x, y) = if x == 0 then y %% 7 else f(x-1, 2*y) + f(x-1, 2*y+1)
var s = 0
for i in 0 .. %d {
  s += f(%d, i)
}
assert s > 0, "s"
`, passes, depth)
}

// longExpressionInLoop evaluates an expression of 9999 operators on every pass of a loop.
func longExpressionInLoop(passes int) string {
	terms := make([]string, 5000)
	for k := range terms {
		terms[k] = fmt.Sprintf("i * %d", k%97+1)
	}
	return fmt.Sprintf("plan long\nvar s = 0\nfor i in 0 .. %d {\n  s += %s\n}\nassert s > 0, \"s\"\n", passes, strings.Join(terms, " + "))
}

// countSteps elaborates f and returns its count of evaluation steps beside the error.
func countSteps(t testing.TB, f *dsl.File, params map[string]int64, opt Options) (int64, error) {
	t.Helper()
	el := newElaborator(t.Context(), f, params, opt)
	el.run()
	return el.work.steps(), el.result()
}

func parse(t testing.TB, src string) *dsl.File {
	t.Helper()
	f, err := dsl.Parse("t.dag", []byte(src))
	require.NoError(t, err)
	return f
}

// stepsDiagnostic is the one diagnostic of err, which must be the budget's.
func stepsDiagnostic(t *testing.T, err error) *diag.Diagnostic {
	t.Helper()
	require.Error(t, err)
	var l diag.List
	require.True(t, errors.As(err, &l), "%T %v", err, err)
	require.Len(t, l, 1, "%v", err)
	assert.Equal(t, diag.Limit, l[0].Code)
	return l[0]
}

// TestStepsExceeded: a plan whose work is the product of limits that each hold stops once it
// has evaluated MaxSteps steps (lowered here), at the statement it was evaluating (at the call
// of a def, when it was in one), naming the loop or the ranks that multiply the work.
func TestStepsExceeded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src string
		want      string
		related   []string
		max       int // the budget: 1 << 22 if 0
	}{
		{"a recursion in a loop", recursionInLoop(1000000, 15),
			"t.dag:6:8: evaluation too long: more than 4194304 steps over all ranks (a loop of 1000000 passes, about 1441768 steps each); is a loop bound wrong?",
			[]string{"t.dag:5:1: the loop, on pass 3 of 1000000"}, 0},
		{"a long expression in a loop", longExpressionInLoop(100000),
			"t.dag:4:3: evaluation too long: more than 4194304 steps over all ranks (a loop of 100000 passes, about 20001 steps each); is a loop bound wrong?",
			[]string{"t.dag:3:1: the loop, on pass 210 of 100000"}, 0},
		{"inner loops, the outer one past its first pass", "plan p\nvar s = 0\nfor i in 0 .. 1000 {\n  for j in 0 .. 1000 {\n    s += i * j + j\n  }\n}\n",
			"t.dag:5:5: evaluation too long: more than 4194304 steps over all ranks (a loop of 1000 passes, about 7002 steps each); is a loop bound wrong?",
			[]string{"t.dag:3:1: the loop, on pass 600 of 1000"}, 0},
		{"ranks", "plan p\nparam ranks = 65536\ndef g(x) = x * x + 1\nlet a = g(rank) + g(rank + 1) + g(rank + 2)\n",
			"t.dag:4:9: evaluation too long: more than 1048576 steps over all ranks (65536 ranks, about 51 steps each); is the rank count wrong?", nil, 1 << 20},
		{"one call", "plan p\ndef f(n) = if n == 0 then 0 else f(n - 1) + f(n - 1) + 1\nlet x = f(15)\n",
			"t.dag:3:9: evaluation too long: more than 1048576 steps over all ranks (in one call of f); a recursion that branches too much?", nil, 1 << 20},
		{"a table", "plan p\nlet t = [i * i + i * 3 - 1 for i in 0 .. 1 << 20]\n",
			"t.dag:2:1: evaluation too long: more than 4194304 steps over all ranks (in one statement); split the work, or simplify it", nil, 0},
		{"the init of a buffer", "plan p\nparam ranks = 4\ndef f(n) = if n == 0 then 1 else f(n - 1) + f(n - 1)\nbuffer a u64[1 << 20] init f(i % 13) + f(12 - i % 13)\n",
			"t.dag:4:28: evaluation too long: more than 4194304 steps over all ranks (in one call of f); a recursion that branches too much?", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, err := elaborateWith(t, tc.src, nil, Options{MaxSteps: cmp.Or(tc.max, 1<<22)})
			d := stepsDiagnostic(t, err)
			assert.Equal(t, tc.want, d.Pos.String()+": "+d.Text())
			var related []string
			for _, r := range d.Related {
				related = append(related, r.Pos.String()+": "+r.Label)
			}
			assert.Equal(t, tc.related, related)
			if !race.Enabled {
				assert.Less(t, time.Since(start), 5*time.Second, "4M steps take well under a second")
			}
		})
	}
}

// TestStepsRealBudget: the plans of TestStepsExceeded that ran for hours fail within seconds
// at the package's budget.
func TestStepsRealBudget(t *testing.T) {
	if testing.Short() || race.Enabled {
		t.Skip("evaluates MaxSteps steps: seconds, ten times more under the race detector")
	}
	t.Parallel()
	start := time.Now()
	_, err := elaborateWith(t, recursionInLoop(1000000, 15), nil, Options{})
	d := stepsDiagnostic(t, err)
	assert.Equal(t, fmt.Sprintf("t.dag:6:8: evaluation too long: more than %d steps over all ranks (a loop of 1000000 passes, about 1441768 steps each); is a loop bound wrong?", MaxSteps), d.Pos.String()+": "+d.Text())
	t.Logf("failed after %v", time.Since(start))
	assert.Less(t, time.Since(start), 60*time.Second)
}

// TestStepsJustUnder: a plan that counts exactly the budget passes, one step more fails; the
// count is the same whether the ranks are elaborated one after the other or in shards.
func TestStepsJustUnder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		src    string
		params map[string]int64
	}{
		{"a recursion in a loop", recursionInLoop(40, 10), nil},
		{"a long expression in a loop", longExpressionInLoop(40), nil},
		{"ranks", "plan p\nparam ranks = 64\ndef g(x) = x * x + 1\nfor k in 0 .. 50 {\n  let a = g(rank + k) + min(k, 3)\n  op o[k] = nop\n}\nassert rank >= 0\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := parse(t, tc.src)
			n, err := countSteps(t, f, tc.params, Options{Workers: 1})
			require.NoError(t, err)
			assert.Less(t, n, int64(MaxSteps))
			exact := Options{MaxSteps: int(n)}
			g, sharded, err := elaborateBothWith(t, f, tc.params, exact)
			require.NoError(t, err)
			require.NotNil(t, g)
			if g.Ranks > 1 {
				assert.True(t, sharded)
				par, err := countSteps(t, f, tc.params, Options{Workers: 3, parallelSet: true})
				require.NoError(t, err)
				assert.Equal(t, n, par, "the count of the shards")
			}
			exact.MaxSteps--
			_, _, err = elaborateBothWith(t, f, tc.params, exact)
			d := stepsDiagnostic(t, err)
			assert.Contains(t, d.Msg, fmt.Sprintf("evaluation too long: more than %d steps over all ranks", n-1))
		})
	}
}

// TestStepsCancelled: an elaboration notices the cancellation of its context within a few
// thousand steps, and returns its cause.
func TestStepsCancelled(t *testing.T) {
	t.Parallel()
	f := parse(t, recursionInLoop(1000000, 15))
	cause := errors.New("interrupted")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
	start := time.Now()
	_, err := Elaborate(ctx, f, nil, Options{})
	assert.Same(t, cause, err)
	assert.Less(t, time.Since(start), 5*time.Second)

	// Cancelled before: nothing is evaluated, on one rank or many.
	f = parse(t, "plan p\nparam ranks = 4096\nop x = nop\n")
	g, err := Elaborate(ctx, f, nil, Options{})
	assert.Nil(t, g)
	assert.Same(t, cause, err)
}

// TestStepsShippedPlans: the plans of plans/, examples/mpi/ and testdata/ stay far below the
// budget at their params (the largest count is logged).
func TestStepsShippedPlans(t *testing.T) {
	t.Parallel()
	largest, name, plans := int64(0), "", 0
	for _, dir := range []string{"plans", "examples/mpi", "testdata"} {
		err := filepath.WalkDir(filepath.Join("..", "..", dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			var f *dsl.File
			src, err := os.ReadFile(path)
			require.NoError(t, err)
			switch filepath.Ext(path) {
			case ".dag":
				f, err = dsl.Parse(path, src)
			case ".xml":
				f, err = msccl.Convert(path, src, msccl.Options{})
			default:
				return nil
			}
			if err != nil { // testdata has plans that do not parse
				return nil
			}
			n, _ := countSteps(t, f, nil, Options{})
			if plans++; n > largest {
				largest, name = n, path
			}
			return nil
		})
		require.NoError(t, err)
	}
	t.Logf("%d plans; the largest count is %d steps, %s", plans, largest, name)
	assert.Greater(t, plans, 50)
	assert.Less(t, largest, int64(MaxSteps/1000))
}
