package elaborate

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Tables: built by a loop or listed, global (seen by functions) or per rank or per pass, read by
// index, and every misuse a positioned error.
func TestTables(t *testing.T) {
	t.Parallel()
	ok := `plan t
param ranks = 4
def sq(x) = x * x
let squares = [sq(j) for j in 0 .. 8]
let odd = [j for j in 0 .. 10 if j % 2 == 1]
let evens = [j for j in 0 .. 10 step 2]
let fixed = [3, 1, 2]
let empty = [j for j in 0 .. 0]
def pick(k) = squares[fixed[k]] # a function sees the global tables
let mine = [rank * 10 + j for j in 0 .. 3]
assert len(squares) == 8 && squares[7] == 49 && len(empty) == 0
assert len(odd) == 5 && odd[0] == 1 && odd[4] == 9 && len(evens) == 5 && evens[4] == 8
assert pick(0) == 9 && pick(2) == 4
assert mine[2] == rank * 10 + 2
for s in 0 .. 3 {
  let t = [s * j for j in 0 .. s + 1] # a new table at every pass
  assert len(t) == s + 1 && t[s] == s * s
}
let squares2 = squares[3] # a constant may read a table
assert squares2 == 9
`
	_, msg := elab(t, ok, nil)
	assert.Empty(t, msg)

	for _, tc := range []struct{ body, want string }{
		{"let t = [1, 2]\nlet x = t[2]", "t.dag:4:11: index 2 is out of range for table t (2 elements: 0..1)"},
		{"let t = [1, 2]\nlet x = t[-1]", "t.dag:4:11: index -1 is out of range for table t"},
		{"let t = [j for j in 0 .. 0]\nlet x = t[0]", "t.dag:4:11: index 0 is out of range for table t, which is empty"},
		{"let k = 3\nlet x = k[0]", "t.dag:4:9: k is not a table"},
		{"let x = nope[0]", "t.dag:3:9: undefined table nope"},
		{"let t = [1, 2]\nlet x = t + 1", "t.dag:4:9: t is a table: read an element of it, t[i]"},
		{"let t = [1]\nlet t = [2]", "t.dag:4:5: t is already defined in this block"},
		{"let x = len(3)", "len takes the name of a table"},
		{"let k = 1\nlet x = len(k)", "len(k): k is not a table"},
		{"let t = [j for j in 0 .. 4 step 0]", "t.dag:3:33: for step 0: the step must be positive"},
		{"let t = [j for j in 0 .. 2000000]", "tables hold at most 1048576 elements"},
		{"let t = [1 / (rank - rank)]", "division by zero"},
		{"let u = [rank]\ndef f(k) = u[k]\nlet x = f(0)", "undefined table u in function f"},
		{"def len(x) = x", "len is a built-in function"},
	} {
		_, msg := elab(t, "plan t\nparam ranks = 2\n"+tc.body+"\n", nil)
		assert.Contains(t, msg, tc.want, tc.body)
	}
}
