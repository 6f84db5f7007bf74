package simgrid

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/coredag/coredag/predict"
)

// FatTree is a fat tree as SimGrid's FAT_TREE cluster describes it (topo_parameters): Levels
// levels of switches; at level i (1 is the leaves' switches) Down[i-1] children per switch,
// Up[i-1] parents per node of the level below, Links[i-1] links between a node and each of its
// parents. The hosts are the product of Down.
type FatTree struct {
	Levels          int
	Down, Up, Links []int
}

// String is the topo_parameters text: "2;32,32;1,32;1,1".
func (t FatTree) String() string {
	list := func(xs []int) string {
		s := make([]string, len(xs))
		for i, x := range xs {
			s[i] = strconv.Itoa(x)
		}
		return strings.Join(s, ",")
	}
	return fmt.Sprintf("%d;%s;%s;%s", t.Levels, list(t.Down), list(t.Up), list(t.Links))
}

// Hosts is how many hosts the tree has.
func (t FatTree) Hosts() int {
	n := 1
	for _, d := range t.Down {
		n *= d
	}
	return n
}

// ParseFatTree reads a topo_parameters text. Errors say which part is wrong.
func ParseFatTree(s string) (FatTree, error) {
	parts := strings.Split(s, ";")
	if len(parts) != 4 {
		return FatTree{}, fmt.Errorf("fat tree %q: want LEVELS;DOWN,...;UP,...;LINKS,... (four parts separated by ';', as 2;32,32;1,32;1,1)", s)
	}
	levels, err := strconv.Atoi(strings.TrimSpace(parts[0]))
	if err != nil || levels < 1 || levels > 8 {
		return FatTree{}, fmt.Errorf("fat tree %q: levels %q: want a number from 1 to 8", s, parts[0])
	}
	t := FatTree{Levels: levels}
	for i, dst := range []*[]int{&t.Down, &t.Up, &t.Links} {
		name := [...]string{"down", "up", "links"}[i]
		fs := strings.Split(parts[i+1], ",")
		if len(fs) != levels {
			return FatTree{}, fmt.Errorf("fat tree %q: %s counts %q: want %d numbers, one per level", s, name, parts[i+1], levels)
		}
		for _, f := range fs {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v < 1 || v > 1<<16 {
				return FatTree{}, fmt.Errorf("fat tree %q: %s count %q: want a number from 1 to 65536", s, name, f)
			}
			*dst = append(*dst, v)
		}
	}
	h := 1.0
	for _, d := range t.Down {
		h *= float64(d)
	}
	if h > 1<<22 {
		return FatTree{}, fmt.Errorf("fat tree %q: %g hosts: at most %d", s, h, 1<<22)
	}
	return t, nil
}

// AutoFatTree is a two-level fat tree of full bisection for at least ranks hosts: about
// sqrt(ranks) leaf switches of about sqrt(ranks) hosts each, every leaf switch linked to every
// top switch (2;32,32;1,32;1,1 for 1,024 ranks).
func AutoFatTree(ranks int) FatTree {
	ranks = max(ranks, 1)
	d1 := int(math.Ceil(math.Sqrt(float64(ranks))))
	d2 := (ranks + d1 - 1) / d1
	return FatTree{Levels: 2, Down: []int{d1, d2}, Up: []int{1, d1}, Links: []int{1, 1}}
}

// Platform is the SimGrid platform a schedule runs on: a fat tree whose hosts are named r0,
// r1, ... (rank r runs on host r<r>), each computing 1 Gflop/s on one core (so an exec's flops are
// nanoseconds), every link of the same bandwidth and latency, shared by the flows that cross it in
// each direction (SPLITDUPLEX).
type Platform struct {
	Tree FatTree
	// LinkBps is every link's bandwidth in bytes per second; LinkLatency its latency in seconds.
	LinkBps, LinkLatency float64
}

// PlatformFor is the fat tree t with the figures of par: every link of bandwidth 1/G_ns_per_byte
// (the bytes missing the caches add to G as in predict, for g's footprint: pass the same
// missShare as Build uses, predict.MissShare) and of latency L_ns / (2 levels), so that a message
// between hosts whose path crosses the top switches sees L_ns, as in predict; a message under one
// leaf switch sees less.
func PlatformFor(t FatTree, par predict.Params, missShare float64) Platform {
	b := par.B + missShare*par.Mem // ns per byte
	bps := 1e15                    // G = 0: as good as no limit
	if b > 0 {
		bps = 1e9 / b
	}
	return Platform{Tree: t, LinkBps: bps, LinkLatency: par.L * 1e-9 / float64(2*t.Levels)}
}

// XML is the platform file SimGrid reads.
func (p Platform) XML() []byte {
	var b strings.Builder
	b.WriteString("<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n<platform version=\"4.1\">\n")
	fmt.Fprintf(&b, "  <!-- written by coredag simulate: a fat tree of %d hosts -->\n", p.Tree.Hosts())
	fmt.Fprintf(&b, "  <cluster id=\"coredag\" prefix=\"r\" suffix=\"\" radical=\"0-%d\" speed=\"1Gf\" core=\"1\"\n", p.Tree.Hosts()-1)
	fmt.Fprintf(&b, "    bw=\"%sBps\" lat=\"%ss\" loopback_bw=\"%sBps\" loopback_lat=\"%ss\" sharing_policy=\"SPLITDUPLEX\"\n",
		num(p.LinkBps), num(p.LinkLatency), num(p.LinkBps), num(p.LinkLatency*float64(2*p.Tree.Levels)))
	fmt.Fprintf(&b, "    topology=\"FAT_TREE\" topo_parameters=\"%s\"/>\n</platform>\n", p.Tree)
	return []byte(b.String())
}

func num(x float64) string { return strconv.FormatFloat(x, 'g', 12, 64) }
