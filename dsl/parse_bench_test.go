package dsl

import (
	"fmt"
	"strings"
	"testing"
)

// benchSource generates a plan of about n statements using most of the language: loops,
// ifs, lets with Go-precedence expressions, every operation kind and trailing comments.
func benchSource(n int) []byte {
	var b strings.Builder
	b.WriteString("plan bench\nparam ranks = 64\nparam n = 4KiB\nbuffer data f32[ranks * n] remote_write init rank + 1\n")
	b.WriteString("buffer tmp f32[n]\nbuffer ctr u64[4] remote_atomic\nqueue right to (rank + 1) % ranks peer left\n")
	b.WriteString("queue left to (rank - 1) % ranks peer right\n")
	for i := 0; b.Len() < n*60; i++ {
		fmt.Fprintf(&b, "for s%d in 0 .. ranks - 1 step 1 { # block %d\n", i, i)
		fmt.Fprintf(&b, "  let c%d = (rank - s%d + 1) %% ranks * 2 ** 3 - min(1, max(2, log2(8)))\n", i, i)
		fmt.Fprintf(&b, "  op tx%d[s%d] = send right data[c%d * n : (c%d + 1) * n]  # send\n", i, i, i, i)
		fmt.Fprintf(&b, "  op rx%d[s%d] = recv left tmp\n", i, i)
		fmt.Fprintf(&b, "  op rd%d[s%d] = reduce sum data[0:n] from tmp after rx%d[s%d]\n", i, i, i, i)
		fmt.Fprintf(&b, "  op at%d[s%d] = atomic cas right ctr[0] 0 (rank + 1) to ctr[1]\n", i, i)
		fmt.Fprintf(&b, "  if s%d > 0 && s%d != 3 { tx%d[s%d], rx%d[s%d] after rd%d[s%d - 1] } else { op nn%d[s%d] = nop }\n",
			i, i, i, i, i, i, i, i, i, i)
		b.WriteString("}\n")
	}
	return []byte(b.String())
}

func BenchmarkParse(b *testing.B) {
	for _, n := range []int{1_000, 10_000} { // two sizes show the cost per statement is flat
		src := benchSource(n)
		stmts := 0
		if f, err := Parse("bench.dag", src); err != nil {
			b.Fatal(err)
		} else {
			stmts = countStmts(f.Stmts)
		}
		b.Run(fmt.Sprintf("stmts=%d", stmts), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse("bench.dag", src); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(stmts), "ns/stmt")
		})
	}
}

func BenchmarkFormat(b *testing.B) {
	src := benchSource(10_000)
	f, err := Parse("bench.dag", src)
	if err != nil {
		b.Fatal(err)
	}
	stmts := countStmts(f.Stmts)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		Format(f)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(stmts), "ns/stmt")
}

func countStmts(list []Stmt) int {
	n := 0
	for _, s := range list {
		n++
		switch s := s.(type) {
		case *ForStmt:
			n += countStmts(s.Body)
		case *IfStmt:
			n += countStmts(s.Then) + countStmts(s.Else)
		}
	}
	return n
}
