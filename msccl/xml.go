package msccl

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/coredag/coredag/diag"
)

// Algo is an MSCCL-IR algorithm as its XML states it, with the position of every element.
type Algo struct {
	Name, Proto, Coll string
	NChannels         int
	NChunksPerLoop    int
	NGPUs             int
	Root              int // the root attribute of a reduce or broadcast; -1 when absent
	Inplace           bool
	GPUs              []*GPU
	Pos               diag.Pos
	attrs             attrs
}

// GPU is one <gpu>: a rank, its buffer sizes in chunks and its threadblocks.
type GPU struct {
	ID                        int
	IChunks, OChunks, SChunks int
	TBs                       []*TB
	Pos                       diag.Pos
	attrs                     attrs
}

// TB is one <tb>: the peers it sends to and receives from (-1 for none), its channel and its
// steps, which run in order.
type TB struct {
	ID, Send, Recv, Chan int
	Steps                []*Step
	Pos                  diag.Pos
	attrs                attrs
}

// Step is one <step>. Buffers are 'i', 'o' or 's'; offsets and counts are in chunks; DepID and
// Deps are -1 when the step depends on no other threadblock's step.
type Step struct {
	S              int
	Type           string
	SrcBuf, DstBuf byte
	SrcOff, DstOff int
	Cnt            int
	DepID, Deps    int
	HasDep         bool
	Pos            diag.Pos
	attrs          attrs
}

// attrs are an element's attributes with the position of each.
type attrs struct {
	names  []string
	values []string
	pos    []diag.Pos
	elem   diag.Pos
}

func (a attrs) find(name string) (string, diag.Pos, bool) {
	for i, n := range a.names {
		if n == name {
			return a.values[i], a.pos[i], true
		}
	}
	return "", a.elem, false
}

// at is the position of attribute name, or of the element when it has none.
func (a attrs) at(name string) diag.Pos {
	_, p, _ := a.find(name)
	return p
}

// MaxChunks bounds offsets and counts (in chunks) so that chunk arithmetic cannot overflow.
const MaxChunks = 1 << 30

// maxGPUs is the largest world size coredag takes.
const maxGPUs = 65536

// Parse reads MSCCL-IR XML: one <algo> holding <gpu>s holding <tb>s holding <step>s. Every
// mistake is a diagnostic at its line and column in the XML.
func Parse(filename string, src []byte) (*Algo, error) {
	r := &reader{file: filename, src: src, lines: diag.LineStarts(src)}
	a := r.read()
	if len(r.errs) > 0 {
		r.errs.Sort()
		return nil, r.errs
	}
	return a, nil
}

type reader struct {
	file    string
	src     []byte
	lines   []int
	errs    diag.List
	scanned int // bytes of start tags read for the attributes' positions (for a test)
}

// posAt is the position of byte offset off.
func (r *reader) posAt(off int64) diag.Pos {
	o := int(min(max(off, 0), int64(len(r.src))))
	i := sort.Search(len(r.lines), func(i int) bool { return r.lines[i] > o }) - 1
	i = max(i, 0)
	return diag.At(r.file, i+1, max(o-r.lines[i], 0)+1) // in a byte-order mark: column 1
}

// errorf adds a diagnostic, up to diag.MaxErrors of them: then one "too many errors", and
// read stops at the end of the element.
func (r *reader) errorf(pos diag.Pos, format string, args ...any) *diag.Diagnostic {
	d, _ := r.errs.AddCapped(diag.Syntax, pos, format, args...)
	return d
}

func (r *reader) read() *Algo {
	// A UTF-8 byte-order mark is legal before the XML, but encoding/xml reads it as text: skip
	// it. Offsets are the file's (skip is added back); columns count from after the mark, as
	// diag.LineStarts and the .dag reader count them.
	skip := int64(r.lines[0])
	d := xml.NewDecoder(bytes.NewReader(r.src[skip:]))
	d.Strict = true
	charset := "" // an encoding the declaration names other than UTF-8
	d.CharsetReader = func(label string, in io.Reader) (io.Reader, error) {
		switch strings.ToLower(label) {
		case "us-ascii", "ascii": // a subset of UTF-8
			return in, nil
		}
		charset = label
		return nil, errors.ErrUnsupported
	}
	var (
		algo *Algo
		gpu  *GPU
		tb   *TB
		open []string // names of the open elements
	)
	for {
		off := skip + d.InputOffset()
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			line, col := d.InputPos()
			if charset != "" {
				pos := diag.At(r.file, 1, 1)
				if i := bytes.Index(r.src[:min(len(r.src), int(off)+200)], []byte("encoding")); i >= 0 {
					pos = r.posAt(int64(i))
				}
				r.errorf(pos, "the XML declares encoding %q: coredag reads UTF-8 only (convert the file with iconv -t UTF-8 and declare encoding=\"UTF-8\", or none)", charset)
				return nil
			}
			msg := strings.TrimPrefix(err.Error(), "xml: ") // "unsupported version ..."
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				msg = se.Msg
			}
			r.errorf(diag.At(r.file, line, col), "the XML is not well-formed: %s", msg)
			return nil
		}
		if r.errs.Capped() {
			return nil // diag.MaxErrors: the rest would mostly repeat them
		}
		switch t := tok.(type) {
		case xml.StartElement:
			pos := r.posAt(off)
			at := r.attrs(t, off, skip+d.InputOffset(), pos)
			parent := ""
			if len(open) > 0 {
				parent = open[len(open)-1]
			}
			open = append(open, t.Name.Local)
			want := map[string]string{"algo": "", "gpu": "algo", "tb": "gpu", "step": "tb"}
			p, known := want[t.Name.Local]
			switch {
			case t.Name.Local == "op" && parent == "tb":
				r.errorf(pos, "<op> steps are the newer MSCCL-IR form, which coredag does not read: write the algorithm with <step> elements (msccl-tools' old_format)")
				return nil
			case !known:
				r.errorf(pos, "unknown element <%s>: MSCCL-IR has <algo>, <gpu>, <tb> and <step>", t.Name.Local)
				return nil
			case p != parent || (t.Name.Local == "algo" && algo != nil):
				where := "at the top level"
				if parent != "" {
					where = "inside <" + parent + ">"
				}
				r.errorf(pos, "<%s> %s: MSCCL-IR nests <step> in <tb> in <gpu> in one <algo>", t.Name.Local, where)
				return nil
			}
			switch t.Name.Local {
			case "algo":
				algo = r.algo(at, pos)
			case "gpu":
				gpu = r.gpu(at, pos)
				algo.GPUs = append(algo.GPUs, gpu)
			case "tb":
				tb = r.tb(at, pos)
				gpu.TBs = append(gpu.TBs, tb)
			case "step":
				tb.Steps = append(tb.Steps, r.step(at, pos))
			}
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				where := "outside <algo>"
				if len(open) > 0 {
					where = "inside <" + open[len(open)-1] + ">"
				}
				r.errorf(r.posAt(off), "text %q %s: MSCCL-IR elements hold only elements", strings.TrimSpace(string(t)), where)
				return nil
			}
		}
	}
	if algo == nil {
		r.errorf(diag.At(r.file, 1, 1), "no <algo> element: an MSCCL-IR file is one <algo>")
	}
	return algo
}

// attrs collects an element's attributes and finds each one's position in the element's start
// tag, src[from:to], which the decoder has found well-formed.
func (r *reader) attrs(t xml.StartElement, from, to int64, elem diag.Pos) attrs {
	a := attrs{elem: elem}
	offs := r.attrOffsets(r.src[from:min(to, int64(len(r.src)))])
	var seen map[string]int // an attribute's index in a, for a tag of many (a search of a otherwise)
	if len(t.Attr) > 8 {
		seen = make(map[string]int, len(t.Attr))
	}
	for i, x := range t.Attr {
		if x.Name.Space != "" {
			continue
		}
		pos := elem
		if i < len(offs) {
			pos = r.posAt(from + int64(offs[i]))
		}
		// XML allows an attribute once per start tag; encoding/xml does not check it.
		first := -1
		if seen != nil {
			if k, ok := seen[x.Name.Local]; ok {
				first = k
			} else {
				seen[x.Name.Local] = len(a.names)
			}
		} else {
			first = slices.Index(a.names, x.Name.Local)
		}
		if first >= 0 {
			r.errorf(pos, "attribute %s appears twice in <%s>: the XML is not well-formed (keep one)", x.Name.Local, t.Name.Local).
				Relate(a.pos[first], "the first "+x.Name.Local)
			continue
		}
		a.names = append(a.names, x.Name.Local)
		a.values = append(a.values, x.Value)
		a.pos = append(a.pos, pos)
	}
	return a
}

// attrOffsets returns where each attribute's name starts in a start tag, in order (the order of
// xml.StartElement.Attr). It reads the tag once: an element of n attributes costs O(n), not the
// O(n²) of searching the tag for each name.
func (r *reader) attrOffsets(tag []byte) []int {
	var offs []int
	i := bytes.IndexByte(tag, '<') + 1
	skip := func(in func(byte) bool) {
		for i < len(tag) && in(tag[i]) {
			i++
		}
	}
	skip(func(c byte) bool { return !isSpace(c) && c != '>' && c != '/' }) // the element's name
	for {
		skip(isSpace)
		if i >= len(tag) || tag[i] == '>' || tag[i] == '/' {
			break
		}
		offs = append(offs, i)
		skip(func(c byte) bool { return c != '=' && !isSpace(c) })
		skip(isSpace)
		if i >= len(tag) || tag[i] != '=' {
			break
		}
		i++
		skip(isSpace)
		if i >= len(tag) || tag[i] != '"' && tag[i] != '\'' {
			break
		}
		q := tag[i]
		j := bytes.IndexByte(tag[i+1:], q)
		if j < 0 {
			break
		}
		i += j + 2
	}
	r.scanned += i
	return offs
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// integer reads a required integer attribute in [lo, hi].
func (r *reader) integer(a attrs, elem, name string, lo, hi int) int {
	v, pos, ok := a.find(name)
	if !ok {
		r.errorf(pos, "<%s> has no %s attribute", elem, name)
		return lo
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < int64(lo) || n > int64(hi) {
		r.errorf(pos, "%s=%q: must be an integer between %d and %d", name, v, lo, hi)
		return lo
	}
	return int(n)
}

// optional reads an optional integer attribute, def when absent.
func (r *reader) optional(a attrs, elem, name string, lo, hi, def int) int {
	if _, _, ok := a.find(name); !ok {
		return def
	}
	return r.integer(a, elem, name, lo, hi)
}

func (r *reader) algo(a attrs, pos diag.Pos) *Algo {
	x := &Algo{Pos: pos, attrs: a}
	x.Name, _, _ = a.find("name")
	x.Proto, _, _ = a.find("proto")
	x.Coll, _, _ = a.find("coll")
	x.NGPUs = r.integer(a, "algo", "ngpus", 1, maxGPUs)
	x.NChannels = r.optional(a, "algo", "nchannels", 0, MaxChunks, 0)
	x.NChunksPerLoop = r.optional(a, "algo", "nchunksperloop", 0, MaxChunks, 0)
	x.Root = r.optional(a, "algo", "root", 0, maxGPUs-1, -1)
	x.Inplace = r.optional(a, "algo", "inplace", 0, 1, 0) == 1
	if _, _, ok := a.find("inplace"); !ok {
		x.Inplace = r.optional(a, "algo", "outofplace", 0, 1, 1) == 0
	}
	return x
}

func (r *reader) gpu(a attrs, pos diag.Pos) *GPU {
	return &GPU{
		ID:      r.integer(a, "gpu", "id", 0, maxGPUs-1),
		IChunks: r.integer(a, "gpu", "i_chunks", 0, MaxChunks),
		OChunks: r.integer(a, "gpu", "o_chunks", 0, MaxChunks),
		SChunks: r.integer(a, "gpu", "s_chunks", 0, MaxChunks),
		Pos:     pos, attrs: a,
	}
}

func (r *reader) tb(a attrs, pos diag.Pos) *TB {
	return &TB{
		ID:   r.integer(a, "tb", "id", 0, MaxChunks),
		Send: r.integer(a, "tb", "send", -1, maxGPUs-1),
		Recv: r.integer(a, "tb", "recv", -1, maxGPUs-1),
		Chan: r.optional(a, "tb", "chan", 0, 255, 0),
		Pos:  pos, attrs: a,
	}
}

func (r *reader) step(a attrs, pos diag.Pos) *Step {
	s := &Step{Pos: pos, attrs: a}
	s.S = r.integer(a, "step", "s", 0, MaxChunks)
	s.Type, _, _ = a.find("type")
	s.SrcBuf = r.buf(a, "srcbuf")
	s.DstBuf = r.buf(a, "dstbuf")
	s.SrcOff = r.optional(a, "step", "srcoff", -1, MaxChunks, -1)
	s.DstOff = r.optional(a, "step", "dstoff", -1, MaxChunks, -1)
	s.Cnt = r.optional(a, "step", "cnt", 0, MaxChunks, 1)
	s.DepID = r.optional(a, "step", "depid", -1, MaxChunks, -1)
	s.Deps = r.optional(a, "step", "deps", -1, MaxChunks, -1)
	s.HasDep = r.optional(a, "step", "hasdep", 0, 1, 0) == 1
	if _, p, ok := a.find("type"); !ok {
		r.errorf(p, "<step> has no type attribute")
	}
	return s
}

func (r *reader) buf(a attrs, name string) byte {
	v, pos, ok := a.find(name)
	if !ok {
		return 0
	}
	switch v {
	case "i", "o", "s":
		return v[0]
	}
	r.errorf(pos, "%s=%q: a buffer is i (input), o (output) or s (scratch)", name, v)
	return 0
}
