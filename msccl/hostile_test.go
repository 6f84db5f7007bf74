package msccl_test

import (
	"bytes"
	"encoding/xml"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/msccl"
	"github.com/coredag/coredag/planner"
)

// hostile are values that break out of an XML attribute or a plan comment unless escaped.
var hostile = []string{
	`x" evil="1`,
	`x' evil='1`,
	`</algo><evil/>`,
	`a&b&amp;c`,
	"line\nplan pwned",
	"cr\rplan pwned",
	"tab\tx",
	"<!-- x -->",
	"]]>",
	"\u2028plan pwned", // no line break in a plan, but one in XML 1.1
}

// TestExportHostileAttrs: whatever coll or proto export is given, the XML is well-formed, has
// the attributes it should and no others, and reads back with the value as given; a value XML
// cannot hold (a control character, a byte that is not UTF-8) is refused.
func TestExportHostileAttrs(t *testing.T) {
	src, err := os.ReadFile("../testdata/msccl/ring_allreduce_4.xml")
	if err != nil {
		t.Fatal(err)
	}
	g := load(t, "ring.xml", src)
	for _, v := range hostile {
		for _, opt := range []msccl.ExportOptions{{Coll: v}, {Coll: "custom", Proto: v}} {
			x, err := msccl.Export(g, opt)
			if err != nil {
				t.Fatalf("%+v: %v", opt, err)
			}
			d := xml.NewDecoder(bytes.NewReader(x))
			var algo *xml.StartElement
			for {
				tok, err := d.Token()
				if err != nil {
					if err.Error() != "EOF" {
						t.Fatalf("%+v: %v\n%s", opt, err, x)
					}
					break
				}
				switch e := tok.(type) {
				case xml.StartElement:
					if algo == nil {
						algo = &e
					}
					switch e.Name.Local {
					case "algo", "gpu", "tb", "step":
					default:
						t.Fatalf("%+v: element <%s> in\n%s", opt, e.Name.Local, x)
					}
				case xml.CharData:
					if len(bytes.TrimSpace(e)) > 0 {
						t.Fatalf("%+v: text %q in\n%s", opt, e, x)
					}
				}
			}
			got := map[string]string{}
			for _, a := range algo.Attr {
				got[a.Name.Local] = a.Value
			}
			proto := opt.Proto
			if proto == "" {
				proto = "Simple"
			}
			if len(got) != 10 || got["coll"] != opt.Coll || got["proto"] != proto {
				t.Errorf("%+v: the <algo> attributes are %q", opt, got)
			}
			a, err := msccl.Parse("x.xml", x)
			if err != nil || a.Coll != opt.Coll {
				t.Errorf("%+v: read back as coll %q: %v", opt, a.Coll, err)
			}
		}
	}
	for _, v := range []string{"a\x01b", "nul\x00", "\xff", "\ufffe"} {
		_, err := msccl.Export(g, msccl.ExportOptions{Coll: v})
		if err == nil || !strings.Contains(err.Error(), "ring.xml: coll "+strconv.Quote(v)+" holds ") {
			t.Errorf("coll %q: %v", v, err)
		}
		_, err = msccl.Export(g, msccl.ExportOptions{Proto: v})
		if err == nil || !strings.Contains(err.Error(), "ring.xml: proto "+strconv.Quote(v)+" holds ") {
			t.Errorf("proto %q: %v", v, err)
		}
	}
}

// TestImportHostileComments: the name, coll and proto of an algorithm, and the file's name,
// go into comments of the imported plan, which stay comments whatever they hold: the plan has
// the statements of the algorithm and no others, and no line of a comment is cut.
func TestImportHostileComments(t *testing.T) {
	src, err := os.ReadFile("../testdata/msccl/ring_allreduce_4.xml")
	if err != nil {
		t.Fatal(err)
	}
	clean, err := msccl.Convert("ring.xml", src, msccl.Options{Import: true})
	if err != nil {
		t.Fatal(err)
	}
	want := statements(t, dsl.Format(clean))
	for _, v := range hostile {
		esc := func(s string) string {
			var b strings.Builder
			xml.EscapeText(&b, []byte(s))
			return b.String()
		}
		for _, c := range []struct{ file, xml string }{
			{"ring.xml", strings.Replace(string(src), `proto="Simple"`, `proto="`+esc(v)+`"`, 1)},
			{"ring.xml", strings.Replace(string(src), `name="ring_allreduce_4_1"`, `name="`+esc(v)+`"`, 1)},
			{v + ".xml", string(src)},
		} {
			f, err := msccl.Convert(c.file, []byte(c.xml), msccl.Options{Import: true})
			if err != nil {
				t.Fatalf("%q: %v", v, err)
			}
			text := dsl.Format(f)
			got := statements(t, text)
			if strings.Join(got, "\n") != strings.Join(want, "\n") && !strings.Contains(c.xml, `name="`+esc(v)) {
				t.Errorf("%q in %s: the plan's statements changed:\n%s", v, c.file, text)
			}
			if strings.Contains(string(text), "\nplan pwned") || strings.Contains(string(text), "\rplan pwned") {
				t.Errorf("%q: a comment broke its line:\n%s", v, text)
			}
		}
	}
	// coll is also the expect statement's, and the comment before it quotes it.
	for _, v := range hostile {
		var b strings.Builder
		xml.EscapeText(&b, []byte(v))
		x := strings.Replace(string(src), `coll="allreduce"`, `coll="`+b.String()+`"`, 1)
		f, err := msccl.Convert("ring.xml", []byte(x), msccl.Options{Import: true})
		if err != nil {
			t.Fatalf("coll %q: %v", v, err)
		}
		text := dsl.Format(f)
		if strings.Contains(string(text), "\nplan pwned") || strings.Contains(string(text), "\rplan pwned") || bytes.Contains(text, []byte("\nexpect")) {
			t.Errorf("coll %q:\n%s", v, text)
		}
		if _, err := planner.Load(t.Context(), "ring.dag", text, map[string]int64{"chunk": chunk}, planner.Options{}); err != nil {
			t.Errorf("coll %q: %v\n%s", v, err, text)
		}
	}
}

// statements are the lines of a plan's text that are not comments, with the comments after
// statements cut off; the plan must load.
func statements(t *testing.T, text []byte) []string {
	t.Helper()
	if _, err := planner.Load(t.Context(), "x.dag", text, map[string]int64{"chunk": chunk}, planner.Options{}); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var out []string
	for _, l := range strings.Split(string(text), "\n") {
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "plan ") {
			out = append(out, l)
		}
	}
	return out
}
