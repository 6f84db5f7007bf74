// Package drawtest holds what the tests of drawings share: skipping (or, in CI, failing) a test
// that needs Graphviz's dot program when there is none, and checking that a PNG is really drawn.
package drawtest

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"testing"
)

// NeedDot skips the test when dotProgram (viz.DotProgram) finds no Graphviz dot program, unless
// the environment variable CI is set: CI must run every test, so there the test fails instead.
func NeedDot(t testing.TB, dotProgram func() (string, error)) {
	t.Helper()
	if _, err := dotProgram(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and this test needs Graphviz: %v", err)
		}
		t.Skipf("needs Graphviz: %v", err)
	}
}

// CheckPNG decodes a PNG drawing and checks that it looks drawn: a plausible size, more than a
// few colours, dark strokes (outlines, edges, text) on at least 0.1% of the pixels, and each of
// fills (colours as "#rrggbb") painted on at least 100 pixels, which shapes drawn only in outline
// would not do.
func CheckPNG(t testing.TB, data []byte, fills ...string) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Errorf("not a PNG: %v", err)
		return
	}
	b := img.Bounds()
	if b.Dx() < 200 || b.Dy() < 100 || b.Dx()*b.Dy() > 100_000_000 {
		t.Errorf("implausible PNG size %dx%d", b.Dx(), b.Dy())
	}
	count := map[color.RGBA]int{}
	dark := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := pixel(img, x, y)
			count[c]++
			if c.A == 0xff && int(c.R)+int(c.G)+int(c.B) < 3*64 {
				dark++
			}
		}
	}
	if len(count) <= 16 {
		t.Errorf("the PNG has %d colours; a drawing has more", len(count))
	}
	if dark*1000 < b.Dx()*b.Dy() {
		t.Errorf("the PNG has %d dark pixels of %d: too few for outlines, edges and text", dark, b.Dx()*b.Dy())
	}
	for _, f := range fills {
		var c color.RGBA
		if _, err := fmt.Sscanf(f, "#%02x%02x%02x", &c.R, &c.G, &c.B); err != nil {
			t.Fatalf("fill colour %q: %v", f, err)
		}
		c.A = 0xff
		if count[c] < 100 {
			t.Errorf("fill colour %s is painted on %d pixels", f, count[c])
		}
	}
}

// pixel reads one pixel as 8-bit RGBA (straight alpha), quickly for the decoder's usual types.
func pixel(img image.Image, x, y int) color.RGBA {
	switch m := img.(type) {
	case *image.NRGBA:
		p := m.Pix[m.PixOffset(x, y):]
		return color.RGBA{p[0], p[1], p[2], p[3]}
	case *image.RGBA:
		p := m.Pix[m.PixOffset(x, y):]
		if p[3] == 0xff {
			return color.RGBA{p[0], p[1], p[2], p[3]}
		}
	}
	c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
	return color.RGBA{c.R, c.G, c.B, c.A}
}
