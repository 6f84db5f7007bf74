package msccl

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/coredag/coredag/diag"
)

// manyAttrs is an <algo> with n attributes besides its own, then one GPU.
func manyAttrs(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`<algo name="x" ngpus="1" coll="custom"`)
	for i := range n {
		fmt.Fprintf(&b, ` a%d="%d"`, i, i)
	}
	b.WriteString(` proto="Simple"><gpu id="0" i_chunks="1" o_chunks="1" s_chunks="0"/></algo>`)
	return b.Bytes()
}

// TestAttrsLinear: finding the attributes' positions reads each start tag once, whatever the
// number of attributes (a search of the tag for each name read 100k attributes, 1.1 MB, in 45 s).
// The work is counted in bytes read, not timed.
func TestAttrsLinear(t *testing.T) {
	for _, n := range []int{1000, 16000} {
		src := manyAttrs(n)
		r := &reader{file: "many.xml", src: src, lines: []int{0}}
		a := r.read()
		if len(r.errs) > 0 || a == nil {
			t.Fatalf("%d attributes: %v", n, r.errs)
		}
		if r.scanned > len(src) {
			t.Errorf("%d attributes, %d bytes: the attributes' positions read %d bytes", n, len(src), r.scanned)
		}
		// The positions are right: the last attribute, and one whose name is a prefix of
		// many others' and part of their values.
		if _, p, _ := a.attrs.find("proto"); int(p.Col) != bytes.Index(src, []byte(" proto="))+2 {
			t.Errorf("%d attributes: proto at column %d", n, p.Col)
		}
		if _, p, _ := a.attrs.find("a1"); int(p.Col) != bytes.Index(src, []byte(" a1="))+2 {
			t.Errorf("%d attributes: a1 at column %d", n, p.Col)
		}
	}
}

// BenchmarkParseAttrs: parsing an element of many attributes costs the same per attribute
// at every size (ns/attr flat).
func BenchmarkParseAttrs(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		src := manyAttrs(n)
		b.Run(fmt.Sprintf("attrs=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Parse("many.xml", src); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/attr")
		})
	}
}

// TestDeclarationErrors: an XML declaration coredag cannot honour is refused in words, without
// the decoder's names ("Decoder.CharsetReader is nil", "xml: ..."); a US-ASCII file is UTF-8.
func TestDeclarationErrors(t *testing.T) {
	const algo = `<algo name="x" ngpus="1" coll="custom"><gpu id="0" i_chunks="1" o_chunks="1" s_chunks="0"/></algo>`
	for _, c := range []struct{ decl, want string }{
		{`<?xml version="1.0" encoding="ISO-8859-1"?>`, `d.xml:1:21: the XML declares encoding "ISO-8859-1": coredag reads UTF-8 only (convert the file with iconv -t UTF-8 and declare encoding="UTF-8", or none)`},
		{`<?xml version="1.0" encoding="UTF-16"?>`, `d.xml:1:21: the XML declares encoding "UTF-16": coredag reads UTF-8 only`},
		{`<?xml version="1.1"?>`, `d.xml:1:22: the XML is not well-formed: unsupported version "1.1"; only version 1.0 is supported`},
	} {
		_, err := Parse("d.xml", []byte(c.decl+"\n"+algo))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %s", c.decl, err, c.want)
		}
	}
	for _, decl := range []string{`<?xml version="1.0" encoding="UTF-8"?>`, `<?xml version="1.0" encoding="us-ascii"?>`, ""} {
		if _, err := Parse("d.xml", []byte(decl+"\n"+algo)); err != nil {
			t.Errorf("%s: %v", decl, err)
		}
	}
}

// TestDuplicateAttributes: XML allows an attribute once per start tag, which encoding/xml does
// not check: a second one is refused at its position, naming the first, in a short tag and in
// one of many attributes alike.
func TestDuplicateAttributes(t *testing.T) {
	const algo = `<algo name="x" ngpus="1" coll="custom"><gpu id="0" i_chunks="1" o_chunks="1" s_chunks="0"/></algo>`
	for _, c := range []struct{ src, want, first string }{
		{strings.Replace(algo, `<gpu id="0"`, `<gpu id="0" id="1"`, 1), "attribute id appears twice in <gpu>: the XML is not well-formed (keep one)", `id="0"`},
		{strings.Replace(string(manyAttrs(20)), ` a19="19"`, ` a19="19" a3="x"`, 1), "attribute a3 appears twice in <algo>", ` a3=`},
	} {
		_, err := Parse("d.xml", []byte(c.src))
		l, ok := err.(diag.List)
		if !ok || len(l) != 1 {
			t.Fatalf("%s: got %v, want one diagnostic", c.want, err)
		}
		d := l[0]
		if !strings.Contains(d.Msg, c.want) {
			t.Errorf("got %q, want %q", d.Msg, c.want)
		}
		line, col := posOf(c.src, strings.LastIndex(c.src, c.want[len("attribute "):strings.Index(c.want, " appears")]+"="))
		if int(d.Pos.Line) != line || int(d.Pos.Col) != col {
			t.Errorf("%s: at %d:%d, want %d:%d", c.want, d.Pos.Line, d.Pos.Col, line, col)
		}
		fl, fc := posOf(c.src, strings.Index(c.src, c.first)+strings.IndexFunc(c.first, func(r rune) bool { return r != ' ' }))
		if len(d.Related) != 1 || int(d.Related[0].Pos.Line) != fl || int(d.Related[0].Pos.Col) != fc {
			t.Errorf("%s: related %v, want %d:%d", c.want, d.Related, fl, fc)
		}
	}
}

// posOf is the 1-based line and column of byte offset off of src.
func posOf(src string, off int) (line, col int) {
	line = 1 + strings.Count(src[:off], "\n")
	return line, off - strings.LastIndex(src[:off], "\n")
}

// TestByteOrderMark: a UTF-8 byte-order mark before the XML is legal. The file reads as it does
// without the mark, positions and all, and a mistake on the first line is at the same column
// (columns count from after the mark, as in a .dag file), never at column 0.
func TestByteOrderMark(t *testing.T) {
	const bom = "\ufeff"
	const algo = `<algo name="x" ngpus="1" coll="custom"><gpu id="0" i_chunks="1" o_chunks="1" s_chunks="0"/></algo>`
	for _, src := range []string{algo, `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + algo, "\n" + algo} {
		want, err := Parse("b.xml", []byte(src))
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		got, err := Parse("b.xml", []byte(bom+src))
		if err != nil {
			t.Errorf("%q after a byte-order mark: %v", src, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q after a byte-order mark reads as %+v, want %+v", src, got, want)
		}
	}
	for _, src := range []string{
		"x" + algo, // text outside <algo>
		strings.Replace(algo, `id="0"`, `id="0" id="1"`, 1),
		strings.Replace(algo, `ngpus="1"`, `ngpus="0"`, 1),
		`<gpu id="0"/>`,
		`<?xml version="1.1"?>` + algo,
		`<?xml version="1.0" encoding="UTF-16"?>` + algo,
		"<algo",
		"",
	} {
		_, want := Parse("b.xml", []byte(src))
		_, got := Parse("b.xml", []byte(bom+src))
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("%q after a byte-order mark: got %v, want %v", src, got, want)
		}
		l, _ := got.(diag.List)
		for _, d := range l {
			if d.Pos.Line < 1 || d.Pos.Col < 1 {
				t.Errorf("%q after a byte-order mark: %v is at line %d column %d", src, d, d.Pos.Line, d.Pos.Col)
			}
		}
	}
}
