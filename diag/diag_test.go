package diag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

func eq[T any](t *testing.T, got, want T, what ...any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s\n got: %#v\nwant: %#v", fmt.Sprint(what...), got, want)
	}
}

func TestPosIsCompact(t *testing.T) {
	eq(t, unsafe.Sizeof(Pos{}), uintptr(12))
}

func TestPosString(t *testing.T) {
	for _, tc := range []struct {
		p    Pos
		want string
	}{
		{Pos{}, "-"},
		{InFile("p.dag"), "p.dag"},
		{Pos{Line: 3, Col: 4}, "3:4"},
		{At("p.dag", 3, 4), "p.dag:3:4"},
		{At("x\x1b.dag", 3, 4), `"x\x1b.dag":3:4`},
		{InFile("a\nb.dag"), `"a\nb.dag"`},
	} {
		eq(t, tc.p.String(), tc.want)
	}
}

func TestFileTable(t *testing.T) {
	eq(t, File(""), FileID(0))
	eq(t, FileID(0).Name(), "")
	eq(t, FileID(1<<31).Name(), "", "an ID never handed out")
	a, b := File("table_a.dag"), File("table_b.dag")
	eq(t, File("table_a.dag"), a, "the same name, the same ID")
	eq(t, a.Name(), "table_a.dag")
	eq(t, b.Name(), "table_b.dag")
	if a == b || a == 0 {
		t.Fatalf("IDs %d and %d", a, b)
	}
	// Concurrent interning gives every goroutine the same ID for a name (run with -race).
	var wg sync.WaitGroup
	ids := make([][]FileID, 8)
	for g := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				name := fmt.Sprintf("concurrent_%d.dag", (i+g)%10)
				id := File(name)
				if id.Name() != name {
					t.Errorf("%d names %q, want %q", id, id.Name(), name)
				}
				ids[g] = append(ids[g], id)
			}
		}()
	}
	wg.Wait()
	for i := 0; i < 10; i++ {
		want := File(fmt.Sprintf("concurrent_%d.dag", i))
		for g := range ids {
			eq(t, ids[g][(i-g+50)%10], want, "goroutine ", g, " name ", i)
		}
	}
}

func TestPosOrder(t *testing.T) {
	// Files sort by name whatever order they were interned in.
	z, a := At("zz_order.dag", 1, 1), At("aa_order.dag", 9, 9)
	eq(t, a.Before(z), true)
	eq(t, z.Before(a), false)
	eq(t, At("f.dag", 2, 9).Before(At("f.dag", 3, 1)), true)
	eq(t, At("f.dag", 3, 1).Before(At("f.dag", 3, 2)), true)
	eq(t, At("f.dag", 3, 2).Compare(At("f.dag", 3, 2)), 0)
	eq(t, Pos{}.Before(At("f.dag", 1, 1)), true, "no position comes first")
}

func TestListSortAndDedup(t *testing.T) {
	p := func(line int) Pos { return At("sort.dag", line, 1) }
	var l List
	l.Add(Name, p(5), "unknown op b")
	l.Add(Name, p(2), "unknown op a")
	l.Add(Name, p(5), "unknown op b")                                                       // an exact duplicate
	l.Add(Name, p(5), "unknown op b").Relate(p(1), "declared")                              // differs by a related position
	l.Add(Shape, p(2), "index 9 is out of range")                                           // same place, another code
	l.Add(Name, p(2), "another message")                                                    // same place and code
	l = append(l, &Diagnostic{Code: Name, Pos: p(5), Msg: "unknown op b", Ranks: []int{1}}) // differs by its ranks
	l.Sort()
	var got []string
	for _, d := range l {
		got = append(got, fmt.Sprintf("%s [%s] %d related", d.Error(), d.Code, len(d.Related)))
	}
	eq(t, got, []string{
		"sort.dag:2:1: another message [name] 0 related",
		"sort.dag:2:1: unknown op a [name] 0 related",
		"sort.dag:2:1: index 9 is out of range [shape] 0 related",
		"sort.dag:5:1: unknown op b [name] 0 related",
		"sort.dag:5:1: unknown op b [name] 1 related",
		"sort.dag:5:1: unknown op b (on rank 1) [name] 0 related",
	})
	eq(t, l.Error(), "sort.dag:2:1: another message (and 5 more errors)")
	eq(t, List(nil).Err(), error(nil))
	eq(t, List(nil).Error(), "no errors")
	var asList List
	if !errors.As(fmt.Errorf("wrapped: %w", l.Err()), &asList) || len(asList) != 6 {
		t.Errorf("a List is found through wrapping: %v", asList)
	}
}

func TestFormatRanks(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{[]int{3}, "rank 3"},
		{[]int{1, 0, 1}, "ranks 0, 1"},
		{[]int{0, 1, 2, 3}, "ranks 0-3"},
		{[]int{0, 2, 4, 5, 6, 9}, "ranks 0, 2, 4-6, 9"},
		{nil, "no rank"},
	} {
		eq(t, FormatRanks(tc.in), tc.want)
	}
}

// TestGroup: the same mistake on many ranks is one diagnostic that lists them.
func TestGroup(t *testing.T) {
	pos, other := At("group.dag", 3, 5), At("group.dag", 7, 1)
	d := func(msg string) *Diagnostic { return &Diagnostic{Code: Shape, Pos: pos, Msg: msg} }
	const kind = "index %d is out of range"
	for _, tc := range []struct {
		name string
		add  func(g *Group)
		want []string
	}{
		{"one rank, two numbers: never an empty likewise list", func(g *Group) {
			g.Add(d("index 10 is out of range"), kind, 0)
			g.Add(d("index 11 is out of range"), kind, 0)
		}, []string{"index 10 is out of range (on rank 0)"}},
		{"the others add ranks", func(g *Group) {
			g.Add(d("index 10 is out of range"), kind, 0)
			g.Add(d("index 11 is out of range"), kind, 0)
			g.Add(d("index 12 is out of range"), kind, 2)
		}, []string{"index 10 is out of range (on rank 0; likewise on rank 2)"}},
		{"every rank alike", func(g *Group) {
			for r := 0; r < 4; r++ {
				g.Add(d("index 10 is out of range"), kind, r)
				g.Add(d("index 11 is out of range"), kind, r)
			}
		}, []string{"index 10 is out of range"}},
		{"same message on some ranks, others with their own figures", func(g *Group) {
			for r := 0; r < 8; r++ {
				g.Add(d(fmt.Sprintf("queue q connects to rank %d", r/2)), kind, r)
			}
		}, []string{"queue q connects to rank 0 (on ranks 0, 1; likewise on ranks 2-7)"}},
		{"global first", func(g *Group) {
			g.Add(d("bad 1"), kind)
			g.Add(d("bad 2"), kind, 1)
		}, []string{"bad 1"}},
		{"several ranks at once", func(g *Group) {
			g.Add(d("loop through 0 and 1"), kind, 0, 1)
			g.Add(d("loop through 2 and 3"), kind, 2, 3)
		}, []string{"loop through 0 and 1 (on ranks 0, 1; likewise on ranks 2, 3)"}},
		{"likewise without wording", func(g *Group) {
			first := d("index 10 is out of range")
			g.Add(first, kind, 1)
			g.AddLikewise(first, kind, 3, 3, 5, 1)
		}, []string{"index 10 is out of range (on rank 1; likewise on ranks 3, 5)"}},
		{"another check is another mistake", func(g *Group) {
			g.Add(d("index 10 is out of range"), kind, 0)
			g.Add(d("division by zero"), "division by zero", 1)
		}, []string{"index 10 is out of range (on rank 0)", "division by zero (on rank 1)"}},
		{"other related positions are another mistake", func(g *Group) {
			g.Add(d("op tx declared twice"), "dup", 0)
			g.Add(d("op tx declared twice").Relate(other, "first declaration"), "dup", 1)
			g.Add(d("op tx declared twice").Relate(other, "first declaration with other figures"), "dup", 2)
		}, []string{"op tx declared twice (on rank 0)", "op tx declared twice (on ranks 1, 2)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Group
			tc.add(&g)
			l := g.List(4 * 2)
			var got []string
			for _, d := range l {
				got = append(got, d.Text())
			}
			if tc.name == "every rank alike" {
				l = g.List(4)
				got = []string{l[0].Text()}
			}
			eq(t, got, tc.want)
			for _, d := range l {
				if len(d.Ranks) == 0 && len(d.Likewise) > 0 {
					t.Errorf("%q: likewise ranks without ranks", d.Text())
				}
			}
		})
	}
}

func TestPrint(t *testing.T) {
	const file = "print.dag"
	src := Sources{file: []byte("plan p\n\top\tx = nop after zz\nbuffer é u8[4] # ü\n\ufeffline\r\nlast")}
	for _, tc := range []struct {
		name string
		d    *Diagnostic
		want string
	}{
		{"tabs count four columns", &Diagnostic{Pos: At(file, 2, 19), Msg: "unknown op zz"},
			"print.dag:2:19: unknown op zz\n        op    x = nop after zz\n                            ^\n"},
		{"multibyte characters count once", &Diagnostic{Pos: At(file, 3, 17), Msg: "here"},
			"print.dag:3:17: here\n    buffer é u8[4] # ü\n                   ^\n"},
		{"a column past the end", &Diagnostic{Pos: At(file, 1, 40), Msg: "end"},
			"print.dag:1:40: end\n    plan p\n          ^\n"},
		{"CRLF and a lone last line", &Diagnostic{Pos: At(file, 5, 1), Msg: "last"},
			"print.dag:5:1: last\n    last\n    ^\n"},
		{"no line: no quote", &Diagnostic{Pos: InFile(file), Msg: "-p m: the plan has no param m"},
			"print.dag: -p m: the plan has no param m\n"},
		{"a line the source lacks", &Diagnostic{Pos: At(file, 99, 1), Msg: "gone"}, "print.dag:99:1: gone\n"},
		{"related positions follow the caret", &Diagnostic{Pos: At(file, 2, 19), Msg: "race", Ranks: []int{0}, Likewise: []int{1, 2, 3},
			Related: []Related{{At(file, 3, 8), "the other write"}, {At("other.dag", 1, 2), "there \x1b[31m"}}},
			"print.dag:2:19: race (on rank 0; likewise on ranks 1-3)\n        op    x = nop after zz\n                            ^\n" +
				"    print.dag:3:8: the other write\n    other.dag:1:2: there \\x1b[31m\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			Print(&out, tc.d, src)
			eq(t, out.String(), tc.want)
		})
	}
}

// TestPrintEscapes: a plan's line or a file name cannot send escape sequences to the terminal
// through a diagnostic; the caret stays under the column.
func TestPrintEscapes(t *testing.T) {
	name := "x\x1b[31m.dag"
	src := []byte("plan p\nop a = nop after zz   # \x1b]0;pwned\x07\n")
	var out bytes.Buffer
	Print(&out, List{{Pos: At(name, 2, 18), Msg: "unknown op zz"}}, Sources{name: src})
	eq(t, out.String(), `"x\x1b[31m.dag":2:18: unknown op zz`+"\n"+
		`    op a = nop after zz   # \x1b]0;pwned\x07`+"\n"+
		"                     ^\n")

	// The caret counts an escape as what it prints.
	out.Reset()
	Print(&out, &Diagnostic{Pos: At("p.dag", 1, 4), Msg: "here"}, Sources{"p.dag": []byte("\x1b\tx$")})
	eq(t, out.String(), "p.dag:1:4: here\n    \\x1b    x$\n             ^\n")

	// Other errors: line breaks and tabs stay, the rest is escaped.
	out.Reset()
	Print(&out, errors.New("open \x1b[31m.dag:\n\tno such file \u202e"), nil)
	eq(t, out.String(), "open \\x1b[31m.dag:\n\tno such file \\u202e\n")
	out.Reset()
	Print(&out, nil, nil)
	eq(t, out.String(), "")
}

func TestQuoteName(t *testing.T) {
	eq(t, QuoteName("plans/ring.dag"), "plans/ring.dag")
	eq(t, QuoteName("plans/çà.dag"), "plans/çà.dag", "printable Unicode is left alone")
	eq(t, QuoteName("a\x1b[31m.dag"), `"a\x1b[31m.dag"`)
	eq(t, QuoteName("a\nb.dag"), `"a\nb.dag"`)
	eq(t, QuoteName("a\u202eb.dag"), `"a\u202eb.dag"`)
	eq(t, QuoteName("\xff.dag"), `"\xff.dag"`)
	eq(t, EscapeControls("tab\there\nnext \x7f \u0085"), "tab\there\nnext \\x7f \\u0085")
}

func TestLineStarts(t *testing.T) {
	eq(t, LineStarts([]byte("a\nb\r\nc\rd")), []int{0, 2, 5, 7})
	eq(t, LineStarts([]byte("\ufeffa\n")), []int{3, 5})
	eq(t, LineStarts(nil), []int{0})
}

// TestJSON: the shape of a diagnostic in --json output.
func TestJSON(t *testing.T) {
	d := &Diagnostic{Code: Race, Pos: At("j.dag", 6, 16), Msg: "race on rank 0's data", Ranks: []int{0}, Likewise: []int{1},
		Related: []Related{{At("j.dag", 8, 21), "reduce red on rank 0 reduces into it"}},
		Fix:     &Fix{Msg: "add `red after tx` on rank 0", Edits: []Edit{{Pos: At("j.dag", 8, 40), End: At("j.dag", 8, 40), New: " after tx"}}}}
	b, err := json.Marshal(List{d, {Code: Name, Pos: InFile("j.dag"), Msg: "-p m: no param m"}})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, string(b), `[{"code":"race","file":"j.dag","line":6,"col":16,"message":"race on rank 0's data (on rank 0; likewise on rank 1)",`+
		`"ranks":[0,1],"related":[{"file":"j.dag","line":8,"col":21,"label":"reduce red on rank 0 reduces into it"}],`+
		`"fix":{"message":"add `+"`red after tx`"+` on rank 0","edits":[{"file":"j.dag","line":8,"col":40,"end_line":8,"end_col":40,"new_text":" after tx"}]}},`+
		`{"code":"name","file":"j.dag","line":0,"col":0,"message":"-p m: no param m"}]`)
	eq(t, len(List(nil).ToJSON()), 0)
	if b, _ := json.Marshal(List(nil).ToJSON()); string(b) != "[]" {
		t.Errorf("an empty list is %s, want []", b)
	}
}

// TestGroupCompletesFirst: Add tells which instance is kept, so only that one is completed (a
// costly hint); the others are compared with the message it had when it was added.
func TestGroupCompletesFirst(t *testing.T) {
	pos := At("first.dag", 2, 1)
	var g Group
	var firsts []bool
	for _, rank := range []int{0, 1, 2} {
		d := &Diagnostic{Code: Race, Pos: pos, Msg: "race on data"}
		if rank == 2 {
			d.Msg = "race on data[1]"
		}
		first := g.Add(d, "race", rank)
		firsts = append(firsts, first)
		if first {
			d.Msg += " (add `b after a`)"
		}
	}
	eq(t, firsts, []bool{true, false, false})
	l := g.List(4)
	eq(t, len(l), 1)
	eq(t, l[0].Text(), "race on data (add `b after a`) (on ranks 0, 1; likewise on rank 2)")
}

// A long line is quoted as a window around the column, the caret still under it.
func TestPrintLongLine(t *testing.T) {
	line := strings.Repeat("1+", 100000) + "x"
	src := Sources{"long.dag": []byte("plan p\nlet a = " + line + "\n")}
	for _, col := range []uint32{1, 9, 100000, uint32(len(line) + 8)} {
		var b strings.Builder
		Print(&b, &Diagnostic{Code: "expr", Pos: Pos{File: File("long.dag"), Line: 2, Col: col}, Msg: "m"}, src)
		out := strings.Split(b.String(), "\n")
		if len(out[1]) > maxQuoted+20 {
			t.Fatalf("col %d: quoted %d bytes", col, len(out[1]))
		}
		full := "    let a = " + line
		caret := strings.IndexByte(out[2], '^')
		// the character above the caret is the one at the column
		shown := []rune(out[1])
		if caret >= len(shown) || string(shown[caret]) != string(full[4+col-1]) {
			t.Fatalf("col %d: caret at %d under %q", col, caret, string(shown[min(caret, len(shown)-1)]))
		}
	}
}

// TestAddCapped: a phase that adds with AddCapped reports MaxErrors diagnostics and then one
// "too many errors" where it stopped, which Sort keeps last; nothing after that.
func TestAddCapped(t *testing.T) {
	var l List
	for i := 0; i < MaxErrors; i++ {
		// added in reverse order of position: Sort must still put "too many" last
		d, ok := l.AddCapped(Syntax, At("cap.dag", MaxErrors-i+1, 1), "error %d", i)
		if !ok || d.Msg != fmt.Sprintf("error %d", i) {
			t.Fatalf("error %d: not added", i)
		}
	}
	eq(t, l.Capped(), false)
	d, ok := l.AddCapped(Syntax, At("cap.dag", 1, 1), "one too many")
	eq(t, ok, false)
	d.Relate(At("cap.dag", 1, 1), "harmless") // a stand-in in no list
	eq(t, len(l), MaxErrors+1)
	eq(t, l.Capped(), true)
	for i := 0; i < 3; i++ {
		if _, ok := l.AddCapped(Syntax, At("cap.dag", 1, 2), "later"); ok {
			t.Fatal("added past the cap")
		}
	}
	eq(t, len(l), MaxErrors+1, "one \"too many\" only")
	l.Sort()
	eq(t, l[0].Error(), "cap.dag:2:1: error 49")
	last := l[len(l)-1]
	eq(t, last.Error(), "cap.dag:1:1: too many errors: stopped after the first 50")
	eq(t, last.Code, Limit)
	eq(t, len(last.Related), 0)
	eq(t, l.Capped(), true, "Sort keeps it last")
}

// TestPrintLongLineCopiesWindow: quoting a line copies the window it shows, not the line, so
// printing many diagnostics on a megabyte line (a file of one long run of invalid characters)
// allocates about what it prints. It used to copy the whole line for each diagnostic.
func TestPrintLongLineCopiesWindow(t *testing.T) {
	const n = 200
	line := bytes.Repeat([]byte("$"), 4<<20)
	src := Sources{"wide.dag": append([]byte("plan p\n"), line...)}
	var l List
	for i := 0; i < n; i++ {
		l.Add(Syntax, At("wide.dag", 2, i*(len(line)/n)+1), "invalid character '$'")
	}
	var out bytes.Buffer
	out.Grow(1 << 20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	Print(&out, l, src)
	runtime.ReadMemStats(&after)
	text := out.String()
	if got := strings.Count(text, "\n"); got != 3*n {
		t.Fatalf("%d lines printed, want %d", got, 3*n)
	}
	for i, ln := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if i%3 == 1 && len(ln) > 4+maxQuoted+2*len("…") {
			t.Fatalf("line %d: quoted %d bytes", i, len(ln))
		}
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("printing %d diagnostics on a %d-byte line allocated %d bytes; the line is copied", n, len(line), alloc)
	}
	// Line still returns the whole line.
	whole, ok := src.Line("wide.dag", 2)
	eq(t, ok, true)
	eq(t, len(whole), len(line))
}

// TestLineStartsSized: the line starts are counted before they are collected, so a file of
// millions of short lines leaves no garbage of a growing slice.
func TestLineStartsSized(t *testing.T) {
	for _, src := range []string{"a\nb\nc\n", "a\r\nb\r\n", "a\rb\rc", "", "\ufeffx\n\r\n\r"} {
		l := LineStarts([]byte(src))
		eq(t, cap(l), len(l), src)
	}
	eq(t, LineStarts([]byte("\ufeffx\n\r\n\r")), []int{3, 5, 7, 8})
}

// TestLineAsLineStarts: Print finds lines as far down as it needs them; every line it finds
// is the one LineStarts gives, whatever the line breaks and in whatever order lines are asked.
func TestLineAsLineStarts(t *testing.T) {
	srcs := []string{"", "a", "\n", "\r", "\r\n", "\n\r", "a\nb\r\nc\rd", "\ufeffa\n", "\ufeff", "a\r\r\n\n\rb\r"}
	for i := 0; i < 200; i++ { // pseudo-random mixes of breaks and text
		var b strings.Builder
		if i%7 == 0 {
			b.WriteString(bom)
		}
		for j := 0; j < i%23; j++ {
			b.WriteString([]string{"x", "\n", "\r", "\r\n", "yz"}[(i*31+j*17)%5])
		}
		srcs = append(srcs, b.String())
	}
	for _, src := range srcs {
		starts := LineStarts([]byte(src))
		want := func(n int) (string, bool) {
			if n < 1 || n > len(starts) {
				return "", false
			}
			end := len(src)
			if n < len(starts) {
				end = starts[n]
			}
			return strings.TrimSuffix(strings.TrimSuffix(src[starts[n-1]:end], "\n"), "\r"), true
		}
		s := Sources{"f": []byte(src)}
		cache := map[string]*lineIndex{}
		for _, n := range []int{2, 1, len(starts) + 1, 3, len(starts), 0, 4, 5, 6, 7} {
			got, ok := s.line(cache, "f", n)
			w, wok := want(n)
			if ok != wok || string(got) != w {
				t.Errorf("%q line %d: got %q %v, want %q %v", src, n, got, ok, w, wok)
			}
		}
	}
}

// TestPrintFindsLinesLazily: a diagnostic near the top of a file of millions of lines does
// not cost an index of all of them.
func TestPrintFindsLinesLazily(t *testing.T) {
	src := Sources{"tall.dag": bytes.Repeat([]byte("$\n"), 4<<20)}
	var out bytes.Buffer
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	Print(&out, List{{Code: Syntax, Pos: At("tall.dag", 50, 1), Msg: "invalid character '$'"}}, src)
	runtime.ReadMemStats(&after)
	eq(t, out.String(), "tall.dag:50:1: invalid character '$'\n    $\n    ^\n")
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
		t.Errorf("printing a diagnostic on line 50 of %d lines allocated %d bytes", 4<<20, alloc)
	}
}
