package drawtest

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// recorder collects a check's complaints instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// drawing paints a w x h image: white, with a filled box of fill (outlined in black when outline)
// and, when text, a band of grey levels standing for anti-aliased text.
func drawing(t *testing.T, w, h int, fill color.NRGBA, outline, text bool) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.NRGBA{255, 255, 255, 255}
			inside := x >= w/4 && x < 3*w/4 && y >= h/4 && y < 3*h/4
			border := inside && (x < w/4+2 || x >= 3*w/4-2 || y < h/4+2 || y >= 3*h/4-2)
			switch {
			case border && outline:
				c = color.NRGBA{0, 0, 0, 255}
			case inside:
				c = fill
			case text && y < 8:
				c = color.NRGBA{uint8(x % 64), uint8(x % 64), uint8(x % 64), 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCheckPNG(t *testing.T) {
	t.Parallel()
	blue := color.NRGBA{0xd6, 0xe6, 0xfa, 0xff}
	white := color.NRGBA{255, 255, 255, 255}
	for _, tc := range []struct {
		name string
		png  []byte
		bad  int // complaints expected
	}{
		{"drawn", drawing(t, 400, 200, blue, true, true), 0},
		{"not filled", drawing(t, 400, 200, white, true, true), 1},
		{"no strokes", drawing(t, 400, 200, blue, false, false), 2}, // few colours, no dark pixels
		{"tiny", drawing(t, 40, 20, blue, true, true), 2},           // size, fill
		{"not a PNG", []byte("<svg/>"), 1},
	} {
		r := &recorder{TB: t}
		CheckPNG(r, tc.png, "#d6e6fa")
		if len(r.errs) != tc.bad {
			t.Errorf("%s: %d complaints, want %d: %q", tc.name, len(r.errs), tc.bad, r.errs)
		}
	}
}
