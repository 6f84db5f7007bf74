package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/coredag/coredag/predict"
)

// sizeTicks labels the size axis with binary units at powers of four.
type sizeTicks struct{}

func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := 0; e < 50; e++ {
		v := math.Pow(2, float64(e))
		if v < lo/1.0001 || v > hi*1.0001 {
			continue
		}
		t := plot.Tick{Value: v}
		if e%2 == 0 {
			t.Label = strings.ReplaceAll(formatBytes(int64(v)), " ", "")
		}
		ts = append(ts, t)
	}
	return ts
}

// timeTicks labels the time axis at powers of ten, with units.
type timeTicks struct{}

func (timeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := -1; e < 13; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, float64(e))
			if v < lo/1.0001 || v > hi*1.0001 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 {
				t.Label = formatNs(v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// plotCurves draws predicted time against size, log-log, one line per plan, with the
// crossovers marked and labelled. The format is the file's extension (svg or png).
func plotCurves(cs []curve, path string, par predict.Params) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "coredag predict (figures: " + par.Provider + ")"
	p.X.Label.Text = "message size"
	p.Y.Label.Text = "predicted time of one iteration"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = sizeTicks{}, timeTicks{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	for i, c := range cs {
		xys := make(plotter.XYs, len(c.ns))
		for k := range c.ns {
			xys[k] = plotter.XY{X: float64(c.bytes[k]), Y: math.Max(c.ns[k], 1e-3)}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(c.name, line, points)
	}
	if xs := crossovers(cs); len(xs) > 0 {
		pts := make(plotter.XYs, len(xs))
		for i, x := range xs {
			pts[i] = plotter.XY{X: x.bytes, Y: x.ns}
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: color.Gray{Y: 128}, Radius: vg.Points(3), Shape: draw.RingGlyph{}}
		p.Add(sc)
		p.Legend.Add("crossover of two plans", sc)
	}
	if xs := switches(cs); len(xs) > 0 {
		pts := make(plotter.XYs, len(xs))
		labels := make([]string, len(xs))
		for i, x := range xs {
			pts[i] = plotter.XY{X: x.bytes, Y: x.ns}
			labels[i] = fmt.Sprintf("%s → %s at %s", x.a, x.b, formatBytes(int64(math.Round(x.bytes))))
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(5), Shape: draw.RingGlyph{}}
		p.Add(sc)
		p.Legend.Add("the fastest plan changes", sc)
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: pts, Labels: labels})
		if err != nil {
			return nil, err
		}
		for i := range lb.TextStyle {
			lb.TextStyle[i].Font.Size = vg.Points(8)
		}
		lb.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(-10)}
		p.Add(lb)
	}
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	wt, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, format)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
