package main

import (
	"bytes"
	"fmt"
	"strings"
)

// unifiedDiff returns a unified diff (3 lines of context) from a to b, both labelled name, or
// nil when they are equal. It finds a shortest edit script with Myers' O(ND) algorithm: formatting
// changes few lines, so D is small even for large files.
func unifiedDiff(name string, a, b []byte) []byte {
	x, y := splitLines(a), splitLines(b)
	ops := editScript(x, y)
	if len(ops) == 0 {
		return nil
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "--- %s.orig\n+++ %s\n", name, name)
	const context = 3
	for i := 0; i < len(ops); {
		// a hunk: edits whose gaps of unchanged lines are at most 2*context
		j := i
		for j+1 < len(ops) && ops[j+1].x-ops[j].xEnd() <= 2*context {
			j++
		}
		x0 := max(ops[i].x-context, 0)
		y0 := ops[i].y - (ops[i].x - x0)
		x1 := min(ops[j].xEnd()+context, len(x))
		y1 := ops[j].yEnd() + (x1 - ops[j].xEnd())
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(x0, x1-x0), hunkRange(y0, y1-y0))
		xi := x0
		for k := i; k <= j; k++ {
			for ; xi < ops[k].x; xi++ {
				out.WriteString(" " + x[xi])
			}
			for _, l := range x[ops[k].x:ops[k].xEnd()] {
				out.WriteString("-" + l)
			}
			for _, l := range y[ops[k].y:ops[k].yEnd()] {
				out.WriteString("+" + l)
			}
			xi = ops[k].xEnd()
		}
		for ; xi < x1; xi++ {
			out.WriteString(" " + x[xi])
		}
		i = j + 1
	}
	return out.Bytes()
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start + 1)
	}
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// splitLines splits text into lines that keep their newline; a last line without one gets a
// marker line, as diff(1) prints it.
func splitLines(b []byte) []string {
	s := string(b)
	var lines []string
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s+"\n\\ No newline at end of file\n")
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// edit replaces x[x:x+dx] by y[y:y+dy].
type edit struct{ x, dx, y, dy int }

func (e edit) xEnd() int { return e.x + e.dx }
func (e edit) yEnd() int { return e.y + e.dy }

// editScript returns the edits that turn x into y, in order.
func editScript(x, y []string) []edit {
	n, m := len(x), len(y)
	maxD := n + m
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int
	var d int
search:
	for d = 0; d <= maxD; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var xi int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				xi = v[off+k+1] // down: insert from y
			} else {
				xi = v[off+k-1] + 1 // right: delete from x
			}
			yi := xi - k
			for xi < n && yi < m && x[xi] == y[yi] {
				xi++
				yi++
			}
			v[off+k] = xi
			if xi >= n && yi >= m {
				break search
			}
		}
	}
	// Walk back through the trace: each round d made one single-line move (an insertion from y
	// or a deletion from x) followed by a run of equal lines.
	type step struct {
		x, y int
		del  bool
	}
	var steps []step
	xi, yi := n, m
	for ; d > 0; d-- {
		vp := trace[d]
		k := xi - yi
		pk := k - 1 // came right: deleted x[px]
		if k == -d || (k != d && vp[off+k-1] < vp[off+k+1]) {
			pk = k + 1 // came down: inserted y[py]
		}
		px := vp[off+pk]
		py := px - pk
		steps = append(steps, step{x: px, y: py, del: pk == k-1})
		xi, yi = px, py
	}
	var edits []edit
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		e := edit{x: s.x, y: s.y}
		if s.del {
			e.dx = 1
		} else {
			e.dy = 1
		}
		if l := len(edits); l > 0 && edits[l-1].xEnd() == e.x && edits[l-1].yEnd() == e.y {
			edits[l-1].dx += e.dx
			edits[l-1].dy += e.dy
			continue
		}
		edits = append(edits, e)
	}
	return edits
}
