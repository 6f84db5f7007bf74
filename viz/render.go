package viz

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"

	"github.com/emicklei/dot"
	"github.com/goccy/go-graphviz"
)

// Format is an output format of Render.
type Format string

// Output formats.
const (
	DOT Format = "dot" // DOT text as built, no layout
	SVG Format = "svg"
	PNG Format = "png"
)

// FormatForFile picks the format from a file name's extension (.dot, .gv, .svg, .png).
func FormatForFile(name string) (Format, error) {
	switch ext := strings.ToLower(filepath.Ext(name)); ext {
	case ".dot", ".gv":
		return DOT, nil
	case ".svg":
		return SVG, nil
	case ".png":
		return PNG, nil
	default:
		return "", fmt.Errorf("%s: unknown drawing format %q (use .dot, .svg or .png)", name, ext)
	}
}

// The Graphviz WebAssembly module is process-wide and not safe for concurrent use: one instance,
// created on first use, serves every Render call in turn.
var (
	gvMu  sync.Mutex
	gvCtx *graphviz.Graphviz
)

// Render lays out DOT text with Graphviz's dot engine and writes it to w in the given format.
// DOT is copied through unchanged. It is safe to call from several goroutines (calls are
// serialised).
func Render(dotText []byte, format Format, w io.Writer) error {
	switch format {
	case DOT:
		_, err := w.Write(dotText)
		return err
	case SVG, PNG:
	default:
		return fmt.Errorf("viz: unknown format %q (want dot, svg or png)", string(format))
	}
	gvMu.Lock()
	defer gvMu.Unlock()
	ctx := context.Background()
	if gvCtx == nil {
		gv, err := graphviz.New(ctx)
		if err != nil {
			return fmt.Errorf("viz: starting graphviz: %w", err)
		}
		gvCtx = gv
	}
	graph, err := graphviz.ParseBytes(dotText)
	if err != nil {
		return fmt.Errorf("viz: graphviz cannot read the DOT text: %w", err)
	}
	defer graph.Close()
	// Render the whole image before writing, so a layout failure leaves w untouched.
	var buf bytes.Buffer
	gvFormat := graphviz.Format(format)
	if format == PNG {
		gvFormat = "xdot" // laid out here, painted by rasterize
	}
	if err := gvCtx.Render(ctx, graph, gvFormat, &buf); err != nil {
		return fmt.Errorf("viz: graphviz %s rendering: %w", format, err)
	}
	if format == PNG {
		var img bytes.Buffer
		if err := rasterize(buf.Bytes(), &img); err != nil {
			return err
		}
		buf = img
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// Write renders a view built by Graph or Plan in the given format.
func Write(d *dot.Graph, format Format, w io.Writer) error {
	return Render([]byte(d.String()), format, w)
}
