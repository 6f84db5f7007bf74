package msccl

import (
	"fmt"
	"slices"

	"github.com/coredag/coredag/internal/english"

	"github.com/coredag/coredag/diag"
)

// kind is what a step type does, in the order its parts run.
type kind struct {
	recv   bool // receives from the threadblock's recv peer
	reduce bool // combines with a local operand
	copy   bool // stores into a local dst
	send   bool // sends to the threadblock's send peer
}

// stepKinds are the step types of MSCCL-IR that coredag reads (the executor's semantics: see
// docs/msccl.md).
var stepKinds = map[string]kind{
	"s":    {send: true},
	"r":    {recv: true, copy: true},
	"rcs":  {recv: true, copy: true, send: true},
	"rrs":  {recv: true, reduce: true, send: true},
	"rrc":  {recv: true, reduce: true, copy: true},
	"rrcs": {recv: true, reduce: true, copy: true, send: true},
	"cpy":  {copy: true},
	"re":   {reduce: true},
	"nop":  {},
}

// mscclppTypes are step types of MSCCL++ and of msccl-tools' newer back ends, which have no
// two-sided meaning.
var mscclppTypes = []string{"put", "get", "wait", "signal", "flush", "packet_recv", "d", "st", "rpp", "rppw"}

// usesSrc and usesDst say whether a step reads its src and dst attributes as local chunks.
func (k kind) usesSrc() bool {
	return k.reduce && !k.recv || k.copy && !k.recv || k.send && !k.recv || k.recv && k.reduce
}
func (k kind) usesDst() bool { return k.copy || k.reduce && !k.recv }

// link is one direction of a connection: GPU from sends to GPU to on channel ch.
type link struct{ from, to, ch int }

// check validates what the XML says beyond its syntax: ids, peers, step types, buffer bounds,
// dependencies and that every send has its receive. The algorithm is usable only without errors.
func check(a *Algo) diag.List {
	var errs capped
	if len(a.GPUs) != a.NGPUs {
		errs.Add(diag.Shape, a.attrs.at("ngpus"), "ngpus=%d but the algorithm lists %s", a.NGPUs, english.Plural(len(a.GPUs), "<gpu> element"))
	}
	if a.Root >= a.NGPUs {
		errs.Add(diag.Name, a.attrs.at("root"), "root=%d: the root is a GPU, 0 to ngpus-1 = %d", a.Root, a.NGPUs-1)
	}
	byID := map[int]*GPU{}
	for _, g := range a.GPUs {
		if prev, ok := byID[g.ID]; ok {
			errs.Add(diag.Name, g.attrs.at("id"), "two <gpu> elements with id=%d", g.ID).Relate(prev.Pos, "the first one")
			continue
		}
		if g.ID >= a.NGPUs {
			errs.Add(diag.Name, g.attrs.at("id"), "<gpu id=%d>: ids run from 0 to ngpus-1 = %d", g.ID, a.NGPUs-1)
		}
		byID[g.ID] = g
	}
	if len(errs.List) > 0 {
		return errs.List
	}
	sends := map[link][]*Step{}
	recvs := map[link][]*Step{}
	sendTB := map[link]*TB{}
	recvTB := map[link]*TB{}
	for _, g := range a.GPUs {
		tbs := map[int]*TB{}
		for _, t := range g.TBs {
			if prev, ok := tbs[t.ID]; ok {
				errs.Add(diag.Name, t.attrs.at("id"), "GPU %d has two <tb> elements with id=%d", g.ID, t.ID).Relate(prev.Pos, "the first one")
			}
			tbs[t.ID] = t
			for _, p := range []struct {
				peer  int
				attr  string
				links map[link]*TB
				l     link
			}{{t.Send, "send", sendTB, link{g.ID, t.Send, t.Chan}}, {t.Recv, "recv", recvTB, link{t.Recv, g.ID, t.Chan}}} {
				switch {
				case p.peer < 0:
				case p.peer >= a.NGPUs || p.peer == g.ID:
					errs.Add(diag.Name, t.attrs.at(p.attr), "%s=%d: a peer is another GPU, 0 to %d, or -1 for none", p.attr, p.peer, a.NGPUs-1)
				default:
					if prev, ok := p.links[p.l]; ok {
						errs.Add(diag.Match, t.Pos, "GPU %d has two threadblocks with %s=%d on channel %d: a connection belongs to one threadblock", g.ID, p.attr, p.peer, t.Chan).Relate(prev.Pos, "the first one")
					}
					p.links[p.l] = t
				}
			}
		}
		for _, t := range g.TBs {
			for i, s := range t.Steps {
				if errs.Capped() {
					return errs.List
				}
				if s.S != i {
					errs.Add(diag.Shape, s.attrs.at("s"), "step s=%d is step %d of its threadblock: steps are numbered 0, 1, 2... in order", s.S, i)
				}
				k, ok := stepKinds[s.Type]
				switch {
				case ok:
				case slices.Contains(mscclppTypes, s.Type):
					errs.Add(diag.Syntax, s.attrs.at("type"), "step type %q is an MSCCL++ instruction, which has no two-sided meaning: coredag reads s, r, rcs, rrs, rrc, rrcs, cpy, re and nop", s.Type)
					continue
				default:
					errs.Add(diag.Syntax, s.attrs.at("type"), "unknown step type %q: MSCCL-IR steps are s, r, rcs, rrs, rrc, rrcs, cpy, re and nop", s.Type)
					continue
				}
				if k.send {
					if t.Send < 0 {
						errs.Add(diag.Match, s.attrs.at("type"), "a %s step sends, but its threadblock has send=-1", s.Type).Relate(t.Pos, "the threadblock")
					} else {
						l := link{g.ID, t.Send, t.Chan}
						sends[l] = append(sends[l], s)
					}
				}
				if k.recv {
					if t.Recv < 0 {
						errs.Add(diag.Match, s.attrs.at("type"), "a %s step receives, but its threadblock has recv=-1", s.Type).Relate(t.Pos, "the threadblock")
					} else {
						l := link{t.Recv, g.ID, t.Chan}
						recvs[l] = append(recvs[l], s)
					}
				}
				if s.Type != "nop" && s.Cnt < 1 {
					errs.Add(diag.Shape, s.attrs.at("cnt"), "cnt=%d: a %s step moves at least one chunk", s.Cnt, s.Type)
				}
				if k.usesSrc() {
					checkRange(&errs, g, s, "src", s.SrcBuf, s.SrcOff)
				}
				if k.usesDst() {
					checkRange(&errs, g, s, "dst", s.DstBuf, s.DstOff)
				}
				if s.DepID >= 0 || s.Deps >= 0 {
					d, ok := tbs[s.DepID]
					switch {
					case !ok:
						errs.Add(diag.Name, s.attrs.at("depid"), "depid=%d names no threadblock of GPU %d", s.DepID, g.ID)
					case s.Deps < 0 || s.Deps >= len(d.Steps):
						errs.Add(diag.Name, s.attrs.at("deps"), "deps=%d names no step of threadblock %d of GPU %d, which has %s", s.Deps, d.ID, g.ID, english.Plural(len(d.Steps), "step")).Relate(d.Pos, "the threadblock")
					case d == t && s.Deps >= i:
						errs.Add(diag.Cycle, s.attrs.at("deps"), "step %d depends on step %d of its own threadblock, which runs after it", i, s.Deps)
					}
				}
			}
		}
	}
	for _, l := range sortedLinks(sends, recvs) {
		ss, rs := sends[l], recvs[l]
		for i := range max(len(ss), len(rs)) {
			if errs.Capped() {
				return errs.List
			}
			switch {
			case i >= len(rs):
				d := errs.Add(diag.Match, ss[i].attrs.at("type"), "this %s step sends to GPU %d on channel %d, but GPU %d receives only %s from GPU %d on that channel", ss[i].Type, l.to, l.ch, l.to, english.Plural(len(rs), "message"), l.from)
				if t := recvTB[l]; t != nil {
					d.Relate(t.Pos, "the receiving threadblock")
				}
			case i >= len(ss):
				d := errs.Add(diag.Match, rs[i].attrs.at("type"), "this %s step receives from GPU %d on channel %d, but GPU %d sends only %s to GPU %d on that channel", rs[i].Type, l.from, l.ch, l.from, english.Plural(len(ss), "message"), l.to)
				if t := sendTB[l]; t != nil {
					d.Relate(t.Pos, "the sending threadblock")
				}
			case ss[i].Cnt != rs[i].Cnt:
				errs.Add(diag.Match, rs[i].attrs.at("cnt"), "this step receives cnt=%d chunks, but its matching send sends cnt=%d", rs[i].Cnt, ss[i].Cnt).Relate(ss[i].Pos, "the matching send")
			}
		}
	}
	return errs.List
}

// capped is a diag.List that stops taking diagnostics after diag.MaxErrors (AddCapped): an
// algorithm of a million steps that are all wrong gets the first ones and "too many errors".
type capped struct{ diag.List }

// Add adds a diagnostic unless the list is full, and returns it (a stand-in when it is full).
func (c *capped) Add(code diag.Code, pos diag.Pos, format string, args ...any) *diag.Diagnostic {
	d, _ := c.AddCapped(code, pos, format, args...)
	return d
}

// checkRange reports a src or dst range outside the GPU's buffer.
func checkRange(errs *capped, g *GPU, s *Step, which string, buf byte, off int) {
	if buf == 0 {
		errs.Add(diag.Shape, s.attrs.at(which+"buf"), "a %s step needs %sbuf", s.Type, which)
		return
	}
	size := map[byte]int{'i': g.IChunks, 'o': g.OChunks, 's': g.SChunks}[buf]
	if off < 0 || off+s.Cnt > size {
		what := fmt.Sprintf("chunks %d to %d are", off, off+s.Cnt-1)
		if s.Cnt == 1 {
			what = fmt.Sprintf("chunk %d is", off)
		}
		errs.Add(diag.Shape, s.attrs.at(which+"off"), "%sbuf=%c %soff=%d cnt=%d: %s outside GPU %d's %s, which has %s (%c_chunks)",
			which, buf, which, off, s.Cnt, what, g.ID, bufWords[buf], english.Plural(size, "chunk"), buf)
	}
}

var bufWords = map[byte]string{'i': "input", 'o': "output", 's': "scratch"}

func sortedLinks(a, b map[link][]*Step) []link {
	set := map[link]bool{}
	var out []link
	for _, m := range []map[link][]*Step{a, b} {
		for l := range m {
			if !set[l] {
				set[l] = true
				out = append(out, l)
			}
		}
	}
	slices.SortFunc(out, func(x, y link) int {
		return cmpInts(x.from, y.from, x.to, y.to, x.ch, y.ch)
	})
	return out
}

func cmpInts(pairs ...int) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i] != pairs[i+1] {
			if pairs[i] < pairs[i+1] {
				return -1
			}
			return 1
		}
	}
	return 0
}
