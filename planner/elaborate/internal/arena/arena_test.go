package arena

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestChunk: every value is new and zero, and distinct from the others, across chunks.
func TestChunk(t *testing.T) {
	t.Parallel()
	var c Chunk[[3]int64]
	seen := map[*[3]int64]bool{}
	for i := range 3*chunkLen + 1 {
		p := c.New()
		require.Equal(t, [3]int64{}, *p, "value %d", i)
		require.False(t, seen[p], "value %d handed out twice", i)
		seen[p] = true
		p[0] = int64(i) + 1 // a later value must not see it
	}
}

// TestInterner: a string given twice is kept once, up to the bound; past it, strings are made
// anew and not kept; a clone keeps what the original kept, then its own.
func TestInterner(t *testing.T) {
	t.Parallel()
	in := NewInterner(2)
	a, kept := in.Intern([]byte("tx[1]"))
	require.True(t, kept)
	b, kept := in.Intern([]byte("tx[1]"))
	require.True(t, kept)
	require.Equal(t, "tx[1]", b)
	require.Same(t, unsafe.StringData(a), unsafe.StringData(b), "the same storage")

	_, kept = in.Intern([]byte("tx[2]"))
	require.True(t, kept)
	c, kept := in.Intern([]byte("tx[3]"))
	require.False(t, kept, "past the bound")
	require.Equal(t, "tx[3]", c)
	require.Equal(t, 2, in.Len())

	cl := in.Clone()
	d, kept := cl.Intern([]byte("tx[1]"))
	require.True(t, kept)
	require.Same(t, unsafe.StringData(a), unsafe.StringData(d))
	_, kept = cl.Intern([]byte("tx[4]"))
	require.False(t, kept, "the clone has the same bound")

	var none Interner
	e, kept := none.Intern([]byte("rx[0]"))
	require.False(t, kept)
	require.Equal(t, "rx[0]", e)
	nc := none.Clone()
	_, kept = nc.Intern([]byte("rx[0]"))
	require.False(t, kept)
	require.Zero(t, none.Len())
}

// TestMemo: Put keeps entries up to the bound, and past it still replaces the value of a key
// it keeps.
func TestMemo(t *testing.T) {
	t.Parallel()
	m := NewMemo[string, int](2)
	require.True(t, m.Put("a", 1))
	require.True(t, m.Put("b", 2))
	require.False(t, m.Put("c", 3))
	_, ok := m.Get("c")
	require.False(t, ok)
	require.True(t, m.Put("a", 10))
	v, ok := m.Get("a")
	require.True(t, ok)
	require.Equal(t, 10, v)
	require.Equal(t, 2, m.Len())
}

// TestFree: Get hands back what was Put, last first, then nil.
func TestFree(t *testing.T) {
	t.Parallel()
	var f Free[int]
	require.Nil(t, f.Get())
	a, b := new(int), new(int)
	f.Put(a)
	f.Put(b)
	require.Same(t, b, f.Get())
	require.Same(t, a, f.Get())
	require.Nil(t, f.Get())
}

// TestGrowTo: the room is made once, for n, and what s held is kept.
func TestGrowTo(t *testing.T) {
	t.Parallel()
	s := []int{1, 2}
	s = GrowTo(s, 100)
	require.Equal(t, []int{1, 2}, s)
	require.Equal(t, 100, cap(s))
	p := &s[:1][0]
	s = GrowTo(s, 50) // room enough: the same storage
	require.Same(t, p, &s[:1][0])
}

// TestGrowPrefault: Grow makes room for n more and touches one element per page of it, the
// first of the room included, and nothing before the room.
func TestGrowPrefault(t *testing.T) {
	t.Parallel()
	type elem struct {
		p       *int
		touched int64
		_       [48]byte
	}
	s := make([]elem, 3)
	s = Grow(s, 1000, func(e *elem) { e.touched++ })
	require.Equal(t, 3, len(s))
	require.GreaterOrEqual(t, cap(s), 1003)
	room := s[len(s):cap(s)]
	perPage := pageSize / int(unsafe.Sizeof(elem{}))
	for i := range room {
		want := int64(0)
		if i%perPage == 0 {
			want = 1
		}
		require.Equal(t, want, room[i].touched, "element %d of the room", i)
	}
	for i := range s {
		require.Zero(t, s[i].touched, "element %d before the room", i)
	}

	// Elements larger than a page: every one is touched.
	type big struct {
		n int
		_ [pageSize]byte
	}
	bs := make([]big, 5)
	Prefault(bs, func(b *big) { b.n++ })
	for i := range bs {
		require.Equal(t, 1, bs[i].n)
	}
}

// TestJoin: parts in their windows, moved left, moved right, or outgrown, end up in order after
// what the array held, and the storage past them is cleared.
func TestJoin(t *testing.T) {
	t.Parallel()
	// base holds [0, 1]; three windows of 4 from 2, 6 and 10: room for 14.
	fill := func(w []int, first, n int) []int {
		for i := range n {
			w = append(w, first+i)
		}
		return w
	}
	for _, c := range []struct {
		name  string
		sizes [3]int
	}{
		{"full windows", [3]int{4, 4, 4}},
		{"short first", [3]int{1, 4, 4}},     // the others move left
		{"outgrown middle", [3]int{4, 6, 2}}, // the middle is a copy
		{"empty parts", [3]int{0, 3, 0}},
		{"outgrow all", [3]int{5, 5, 5}}, // more than the storage: a new array
	} {
		t.Run(c.name, func(t *testing.T) {
			all := make([]int, 2, 14)
			all[0], all[1] = -2, -1
			var parts []*Part[int]
			var want []int
			want = append(want, -2, -1)
			next := 100
			for i, n := range c.sizes {
				at := 2 + 4*i
				p := &Part[int]{At: at}
				p.S = fill(Window(all, at, at+4), next, n)
				want = fill(want, next, n)
				next += 100
				parts = append(parts, p)
			}
			got := Join(all, len(parts), func(i int) *Part[int] { return parts[i] })
			require.Equal(t, want, got)
			to := 2
			for i, p := range parts {
				require.Equal(t, to, p.To, "part %d", i)
				to += c.sizes[i]
			}
			if cap(got) == 14 {
				require.Equal(t, make([]int, 14-len(got)), got[len(got):14], "cleared past the parts")
			}
		})
	}
}
