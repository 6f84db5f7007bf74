package elaborate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
)

// TestCascadesStaySilent: what a failed declaration would have declared is not reported again
// where it is used, however it is used.
func TestCascadesStaySilent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, want string }{
		{"queue peer out of range", "plan p\nparam ranks = 2\nbuffer a u8[8]\nqueue q to rank + 5\nop s = send q a\nop r = recv q a after s\n",
			"4:12: queue q connects to rank 5, outside 0..1 (wrap it with % ranks?) (on rank 0; likewise on rank 1)"},
		{"op index", "plan p\nparam ranks = 2\nop x[1 / rank] = nop\nop y = nop after x[1]\n",
			"3:8: division by zero in 1 / 0 (on rank 0)"},
		{"let in a let, a bound, a condition", "plan p\nparam ranks = 2\nlet k = 1 / rank\nlet m = 4 / k\nfor s in 0 .. m { op f[s] = nop }\nif m > 0 { op g = nop }\nop z = nop after f[0], g\n",
			"3:11: division by zero in 1 / 0 (on rank 0)"},
		{"param", "plan p\nparam n = 1 / 0\nlet m = n + 1\nbuffer a u8[m]\nop c = copy a[0] to a[n]\n",
			"2:13: division by zero in 1 / 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := elaborateSrc(t, tc.src, nil)
			require.Error(t, err)
			list, ok := err.(diag.List)
			require.True(t, ok, "%T", err)
			require.Len(t, list, 1, "%v", list)
			assert.Equal(t, "t.dag:"+tc.want, list[0].Error())
		})
	}
}
