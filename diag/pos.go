package diag

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
)

// FileID names a source file by its index in the process-wide file table. The zero FileID is
// "no file". File interns a name; Name returns it.
type FileID uint32

// fileTable is the process-wide table of file names. Names are only ever added, so an ID, once
// handed out, names the same file for the life of the process.
var fileTable = struct {
	mu    sync.RWMutex
	names []string // names[id]; names[0] is "" (no file)
	ids   map[string]FileID
	last  atomic.Pointer[fileEntry] // the name interned last: a parser asks for the same one again and again
}{names: []string{""}, ids: map[string]FileID{}}

type fileEntry struct {
	name string
	id   FileID
}

// File returns the ID of the file called name, adding the name to the table the first time it
// is asked for. File("") is 0. It is safe for concurrent use.
func File(name string) FileID {
	if name == "" {
		return 0
	}
	t := &fileTable
	if e := t.last.Load(); e != nil && e.name == name {
		return e.id
	}
	t.mu.RLock()
	id, ok := t.ids[name]
	t.mu.RUnlock()
	if !ok {
		t.mu.Lock()
		if id, ok = t.ids[name]; !ok {
			id = FileID(len(t.names))
			t.names = append(t.names, name)
			t.ids[name] = id
		}
		t.mu.Unlock()
	}
	t.last.Store(&fileEntry{name, id})
	return id
}

// Name returns the name the ID was interned for ("" for 0 and for an ID File never returned).
func (f FileID) Name() string {
	if f == 0 {
		return ""
	}
	t := &fileTable
	t.mu.RLock()
	defer t.mu.RUnlock()
	if int(f) >= len(t.names) {
		return ""
	}
	return t.names[f]
}

// Pos is a position in a source file: a file, and a 1-based line and column, the column
// counting bytes. The zero Pos means "no position"; a Pos with a file and no line names the file
// alone (a mistake on the command line about that file). A Pos is 12 bytes and comparable.
type Pos struct {
	File      FileID
	Line, Col uint32
}

// At is the position line:col of the file called file.
func At(file string, line, col int) Pos {
	return Pos{File: File(file), Line: clampU32(line), Col: clampU32(col)}
}

// InFile is the position of a file as a whole, without a line.
func InFile(file string) Pos { return Pos{File: File(file)} }

func clampU32(n int) uint32 {
	switch {
	case n < 0:
		return 0
	case uint64(n) > uint64(^uint32(0)):
		return ^uint32(0)
	}
	return uint32(n)
}

// IsValid reports whether p names a place in a file (it has a line).
func (p Pos) IsValid() bool { return p.Line > 0 }

// Filename is the name of p's file, "" when it has none.
func (p Pos) Filename() string { return p.File.Name() }

// String formats p as file:line:col, or the parts of it that are known: "file" without a line,
// "line:col" without a file, "-" for the zero Pos. A file name holding control characters is
// quoted (QuoteName).
func (p Pos) String() string {
	name := p.Filename()
	switch {
	case !p.IsValid() && name == "":
		return "-"
	case !p.IsValid():
		return QuoteName(name)
	case name == "":
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return QuoteName(name) + ":" + strconv.FormatUint(uint64(p.Line), 10) + ":" + strconv.FormatUint(uint64(p.Col), 10)
}

// Compare orders positions by file name, then line, then column: -1 when p comes first, 0 when
// they are equal, +1 otherwise. Files are compared by name, not by ID, so the order does not
// depend on which file was read first.
func (p Pos) Compare(q Pos) int {
	if p.File != q.File {
		a, b := p.Filename(), q.Filename()
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
	}
	switch {
	case p.Line != q.Line:
		return cmpU32(p.Line, q.Line)
	case p.Col != q.Col:
		return cmpU32(p.Col, q.Col)
	}
	return 0
}

// Before reports whether p sorts before q (see Compare).
func (p Pos) Before(q Pos) bool { return p.Compare(q) < 0 }

func cmpU32(a, b uint32) int {
	if a < b {
		return -1
	}
	return 1
}
