package viz

// PNG output. go-graphviz rasterises with its own Go renderer, which drops strokes (node outlines,
// edge lines) and fills open edge curves. So Render asks Graphviz only for the layout in xdot
// form, whose _draw_ attributes spell out every shape, line and text of the drawing, and paints
// those operations here with fogleman/gg: clusters first, then edges, then nodes, then edge
// labels, so no edge is drawn over a node's label.

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/fogleman/gg"
	"github.com/golang/freetype/truetype"
	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/goregular"
)

// Raster scale and bounds: 1.5 pixels per point reads well on screen; huge drawings shrink so
// that no side exceeds maxPixels.
const (
	pngScale  = 1.5
	pngMargin = 8
	maxPixels = 16000
)

// xdotObject is one statement of the laid-out graph with its drawing attributes.
type xdotObject struct {
	kind  byte              // 'g' graph or cluster, 'n' node, 'e' edge
	attrs map[string]string // only the _*draw_ attributes and bb; lookup only
}

// drawAttrs lists the drawing attributes in the order Graphviz paints them.
var drawAttrs = [...]string{"_draw_", "_ldraw_", "_hdraw_", "_tdraw_", "_hldraw_", "_tldraw_"}

// rasterize paints xdot text (Graphviz's -Txdot output) as a PNG.
func rasterize(xdot []byte, w io.Writer) error {
	objs, err := parseXdot(string(xdot))
	if err != nil {
		return err
	}
	if len(objs) == 0 || objs[0].kind != 'g' {
		return fmt.Errorf("viz: xdot output without a graph")
	}
	bb, err := parseFloats(objs[0].attrs["bb"], 4)
	if err != nil {
		return fmt.Errorf("viz: xdot bounding box: %w", err)
	}
	width, height := bb[2]-bb[0], bb[3]-bb[1]
	scale := pngScale
	if m := math.Max(width, height) * scale; m > maxPixels {
		scale *= maxPixels / m
	}
	p := &painter{
		dc:    gg.NewContext(int(width*scale)+2*pngMargin, int(height*scale)+2*pngMargin),
		scale: scale,
		x0:    bb[0],
		y1:    bb[3],
		faces: map[int]font.Face{},
	}
	p.dc.SetColor(color.White)
	p.dc.Clear()
	font, err := truetype.Parse(goregular.TTF)
	if err != nil {
		return fmt.Errorf("viz: font: %w", err)
	}
	p.font = font
	// Painter's order: graph and clusters, edge lines and arrows, nodes, then edge labels.
	passes := []struct {
		kind  byte
		attrs []string
	}{
		{'g', drawAttrs[:]},
		{'e', []string{"_draw_", "_hdraw_", "_tdraw_"}},
		{'n', drawAttrs[:]},
		{'e', []string{"_ldraw_", "_hldraw_", "_tldraw_"}},
	}
	for _, pass := range passes {
		for _, o := range objs {
			if o.kind != pass.kind {
				continue
			}
			for _, a := range pass.attrs {
				if ops, ok := o.attrs[a]; ok {
					if err := p.run(ops); err != nil {
						return fmt.Errorf("viz: xdot %s: %w", a, err)
					}
				}
			}
		}
	}
	return p.dc.EncodePNG(w)
}

// parseXdot reads the statements of Graphviz's xdot output that carry attributes, in order.
func parseXdot(src string) ([]xdotObject, error) {
	var objs []xdotObject
	var head []string // tokens of the current statement before its attribute list
	toks := newDotScanner(src)
	for {
		t, ok, err := toks.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return objs, nil
		}
		switch t {
		case "{", "}", ";":
			head = head[:0]
			continue
		case "[":
		default:
			head = append(head, t)
			continue
		}
		kind := byte('n')
		switch {
		case len(head) > 0 && head[0] == "graph":
			kind = 'g'
		case len(head) > 0 && (head[0] == "node" || head[0] == "edge"):
			kind = 0 // defaults: nothing to draw
		}
		for _, h := range head {
			if h == "->" || h == "--" {
				kind = 'e'
			}
		}
		attrs := map[string]string{}
		for {
			k, ok, err := toks.next()
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, fmt.Errorf("viz: xdot: unterminated attribute list")
			}
			if k == "]" {
				break
			}
			if k == "," || k == ";" {
				continue
			}
			eq, _, err := toks.next()
			if err != nil {
				return nil, err
			}
			if eq != "=" {
				return nil, fmt.Errorf("viz: xdot: expected = after %s", k)
			}
			val, _, err := toks.next()
			if err != nil {
				return nil, err
			}
			if k == "bb" || strings.HasPrefix(k, "_") && strings.HasSuffix(k, "draw_") {
				attrs[k] = val
			}
		}
		if kind != 0 && len(attrs) > 0 {
			objs = append(objs, xdotObject{kind: kind, attrs: attrs})
		}
		head = head[:0]
	}
}

// dotScanner splits DOT text into tokens: identifiers and numbers, quoted strings (unquoted),
// HTML strings, the two edge operators, and single punctuation characters.
type dotScanner struct {
	src string
	pos int
}

func newDotScanner(src string) *dotScanner { return &dotScanner{src: src} }

func (s *dotScanner) next() (string, bool, error) {
	src := s.src
	for s.pos < len(src) && strings.IndexByte(" \t\r\n", src[s.pos]) >= 0 {
		s.pos++
	}
	if s.pos >= len(src) {
		return "", false, nil
	}
	start := s.pos
	switch c := src[s.pos]; {
	case c == '"':
		var b strings.Builder
		for i := s.pos + 1; i < len(src); i++ {
			switch src[i] {
			case '\\':
				if i+1 < len(src) {
					switch src[i+1] {
					case '\n': // line continuation
					case '"':
						b.WriteByte('"')
					case '\\':
						b.WriteByte('\\')
					default:
						b.WriteByte('\\')
						b.WriteByte(src[i+1])
					}
					i++
				}
			case '"':
				s.pos = i + 1
				return b.String(), true, nil
			default:
				b.WriteByte(src[i])
			}
		}
		return "", false, fmt.Errorf("viz: xdot: unterminated string at offset %d", start)
	case c == '<':
		depth := 0
		for i := s.pos; i < len(src); i++ {
			switch src[i] {
			case '<':
				depth++
			case '>':
				depth--
				if depth == 0 {
					s.pos = i + 1
					return src[start+1 : i], true, nil
				}
			}
		}
		return "", false, fmt.Errorf("viz: xdot: unterminated HTML string at offset %d", start)
	case c == '-' && s.pos+1 < len(src) && (src[s.pos+1] == '>' || src[s.pos+1] == '-'):
		s.pos += 2
		return src[start:s.pos], true, nil
	case strings.IndexByte("{}[];,=", c) >= 0:
		s.pos++
		return src[start:s.pos], true, nil
	}
	for s.pos < len(src) && strings.IndexByte(" \t\r\n{}[];,=\"", src[s.pos]) < 0 &&
		!(src[s.pos] == '-' && s.pos+1 < len(src) && (src[s.pos+1] == '>' || src[s.pos+1] == '-') && s.pos > start) {
		s.pos++
	}
	return src[start:s.pos], true, nil
}

func parseFloats(s string, n int) ([]float64, error) {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
	if len(f) != n {
		return nil, fmt.Errorf("want %d numbers in %q", n, s)
	}
	out := make([]float64, n)
	for i, x := range f {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// painter runs xdot drawing operations on a gg context.
type painter struct {
	dc     *gg.Context
	scale  float64
	x0, y1 float64 // graph coordinates of the drawing's left and top edges
	font   *truetype.Font
	faces  map[int]font.Face // by size in tenths of a pixel; lookup only

	pen, fill color.Color
	lineWidth float64
	dash      []float64
	fontSize  float64
}

func (p *painter) x(v float64) float64 { return (v-p.x0)*p.scale + pngMargin }
func (p *painter) y(v float64) float64 { return (p.y1-v)*p.scale + pngMargin }

// opReader walks the operations of one xdot attribute.
type opReader struct {
	s   string
	pos int
}

func (r *opReader) skipSpace() {
	for r.pos < len(r.s) && (r.s[r.pos] == ' ' || r.s[r.pos] == '\n' || r.s[r.pos] == '\t') {
		r.pos++
	}
}

func (r *opReader) word() (string, error) {
	r.skipSpace()
	start := r.pos
	for r.pos < len(r.s) && r.s[r.pos] != ' ' && r.s[r.pos] != '\n' && r.s[r.pos] != '\t' {
		r.pos++
	}
	if start == r.pos {
		return "", fmt.Errorf("operation truncated at offset %d", start)
	}
	return r.s[start:r.pos], nil
}

func (r *opReader) num() (float64, error) {
	w, err := r.word()
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(w, 64)
}

// text reads a byte-counted string "n -bytes".
func (r *opReader) text() (string, error) {
	n, err := r.num()
	if err != nil {
		return "", err
	}
	r.skipSpace()
	if r.pos >= len(r.s) || r.s[r.pos] != '-' {
		return "", fmt.Errorf("text without '-' at offset %d", r.pos)
	}
	r.pos++
	end := r.pos + int(n)
	if n < 0 || end > len(r.s) {
		return "", fmt.Errorf("text length %v out of range", n)
	}
	t := r.s[r.pos:end]
	r.pos = end
	return t, nil
}

func (r *opReader) points() ([]float64, error) {
	n, err := r.num()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > 1e6 {
		return nil, fmt.Errorf("bad point count %v", n)
	}
	pts := make([]float64, 2*int(n))
	for i := range pts {
		if pts[i], err = r.num(); err != nil {
			return nil, err
		}
	}
	return pts, nil
}

// run executes one attribute's operations. Each attribute starts from the default state.
func (p *painter) run(ops string) error {
	p.pen, p.fill = color.Black, color.Black
	p.lineWidth, p.dash, p.fontSize = 1, nil, 14
	r := &opReader{s: ops}
	for {
		r.skipSpace()
		if r.pos >= len(r.s) {
			return nil
		}
		op, err := r.word()
		if err != nil {
			return err
		}
		switch op {
		case "E", "e":
			var v [4]float64
			for i := range v {
				if v[i], err = r.num(); err != nil {
					return err
				}
			}
			p.dc.DrawEllipse(p.x(v[0]), p.y(v[1]), v[2]*p.scale, v[3]*p.scale)
			p.finish(op == "E")
		case "P", "p", "L", "B", "b":
			pts, err := r.points()
			if err != nil {
				return err
			}
			if len(pts) < 4 {
				continue
			}
			p.dc.MoveTo(p.x(pts[0]), p.y(pts[1]))
			if op == "B" || op == "b" {
				for i := 2; i+5 < len(pts); i += 6 {
					p.dc.CubicTo(p.x(pts[i]), p.y(pts[i+1]), p.x(pts[i+2]), p.y(pts[i+3]), p.x(pts[i+4]), p.y(pts[i+5]))
				}
			} else {
				for i := 2; i+1 < len(pts); i += 2 {
					p.dc.LineTo(p.x(pts[i]), p.y(pts[i+1]))
				}
			}
			if op == "P" || op == "p" || op == "b" {
				p.dc.ClosePath()
			}
			p.finish(op == "P" || op == "b")
		case "T":
			var v [4]float64
			for i := range v {
				if v[i], err = r.num(); err != nil {
					return err
				}
			}
			t, err := r.text()
			if err != nil {
				return err
			}
			p.text(v[0], v[1], v[2], v[3], t)
		case "F":
			size, err := r.num()
			if err != nil {
				return err
			}
			if _, err := r.text(); err != nil { // font name: one face serves all
				return err
			}
			p.fontSize = size
		case "C", "c":
			t, err := r.text()
			if err != nil {
				return err
			}
			if op == "C" {
				p.fill = parseColor(t)
			} else {
				p.pen = parseColor(t)
			}
		case "S":
			t, err := r.text()
			if err != nil {
				return err
			}
			p.style(t)
		case "t":
			if _, err := r.num(); err != nil {
				return err
			}
		case "I":
			for i := 0; i < 4; i++ {
				if _, err := r.num(); err != nil {
					return err
				}
			}
			if _, err := r.text(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown operation %q", op)
		}
	}
}

// finish fills or strokes the current path.
func (p *painter) finish(filled bool) {
	if filled {
		p.dc.SetColor(p.fill)
		p.dc.FillPreserve()
	}
	p.dc.SetColor(p.pen)
	p.dc.SetLineWidth(math.Max(p.lineWidth*p.scale, 0.75))
	if p.dash != nil {
		d := make([]float64, len(p.dash))
		for i, x := range p.dash {
			d[i] = x * p.scale
		}
		p.dc.SetDash(d...)
	} else {
		p.dc.SetDash()
	}
	if filled && p.fill == p.pen {
		p.dc.ClearPath()
		return
	}
	p.dc.Stroke()
}

func (p *painter) style(s string) {
	switch {
	case s == "dashed":
		p.dash = []float64{5, 2}
	case s == "dotted":
		p.dash = []float64{1, 3}
	case s == "solid":
		p.dash = nil
	case s == "bold":
		p.lineWidth = 2
	case strings.HasPrefix(s, "setlinewidth(") && strings.HasSuffix(s, ")"):
		if v, err := strconv.ParseFloat(s[len("setlinewidth("):len(s)-1], 64); err == nil {
			p.lineWidth = v
		}
	}
}

// text draws a label line: (x, y) is the baseline anchor, j the justification (-1 left, 0
// centre, 1 right) and w Graphviz's estimate of its width, which the text is kept within.
func (p *painter) text(x, y, j, w float64, t string) {
	size := p.fontSize * p.scale
	face := p.face(size)
	p.dc.SetFontFace(face)
	tw, _ := p.dc.MeasureString(t)
	if limit := w * p.scale; tw > limit && limit > 0 {
		face = p.face(size * limit / tw)
		p.dc.SetFontFace(face)
		tw, _ = p.dc.MeasureString(t)
	}
	px := p.x(x)
	switch {
	case j == 0:
		px -= tw / 2
	case j > 0:
		px -= tw
	}
	p.dc.SetColor(p.pen)
	p.dc.DrawString(t, px, p.y(y))
}

func (p *painter) face(size float64) font.Face {
	key := int(size * 10)
	if f, ok := p.faces[key]; ok {
		return f
	}
	f := truetype.NewFace(p.font, &truetype.Options{Size: float64(key) / 10, Hinting: font.HintingFull})
	p.faces[key] = f
	return f
}

// parseColor reads an xdot colour: #rrggbb or #rrggbbaa (Graphviz writes them in that form), a
// few names, black otherwise.
func parseColor(s string) color.Color {
	switch s {
	case "white":
		return color.White
	case "none", "transparent":
		return color.Transparent
	}
	if len(s) != 7 && len(s) != 9 || s[0] != '#' {
		return color.Black
	}
	v, err := strconv.ParseUint(s[1:], 16, 32)
	if err != nil {
		return color.Black
	}
	if len(s) == 7 {
		return color.NRGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff}
	}
	return color.NRGBA{uint8(v >> 24), uint8(v >> 16), uint8(v >> 8), uint8(v)}
}
