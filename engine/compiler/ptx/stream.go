package ptx

import (
	"fmt"
	"os"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The stream lowering ("simt-stream"): elementwise kernels (every unary and binary op, casts,
// fused groups) and movement kernels (reshape, slice, concat, transpose) recognised by
// matchStream run as grid-stride loops over runs of elements held in registers. Each thread
// takes a chunk of V consecutive elements, V = 16 bytes / the smallest element size among the
// stored vector accesses (among all of them when none is stored), so the narrowest stored
// buffer moves one 16-byte access per chunk, a wider one a few and a narrower load one 8- or
// 4-byte word; a thread issues the loads of U chunks before it converts any of them, so at
// least 64 bytes of loads per thread are in flight. Accesses that are not 16-byte aligned runs (a
// broadcast operand, a slice's rows, a transpose's source) are read or written element by
// element inside the same loop. The last n mod V elements are done one per thread after it.
//
// Semantics. Every element goes through the SIMT path's own element routines (fromBits,
// unaryVal, binaryVal, roundCast, encodeBits), so the bits equal the SIMT path's and the CPU
// backend's; copies move bit patterns without decoding them. Elementwise results do not depend
// on the grid, so the grid is sized from the target's SM count.

// streamEnv turns the stream, reduction and transpose lowerings off ("off"): the SIMT
// lowering of the same kernel is used, for A/B timings and for bisecting a suspected fast-path
// bug.
const streamEnv = "TESSERA_PTX_STREAM"

// fastLoweringsOn reports whether the stream, reduction and transpose lowerings may take a
// kernel: not when streamEnv says off, and not while a planted GPU code-generator fault is
// active (failpoint.GPUNames), since those faults live in the SIMT path and the GPU specs
// must still meet them.
func fastLoweringsOn() bool {
	if os.Getenv(streamEnv) == "off" {
		return false
	}
	for _, n := range failpoint.GPUNames() {
		if failpoint.Enabled(n) && !fastPathFaults[n] {
			return false
		}
	}
	return true
}

// fastPathFaults are the planted GPU faults that live in a fast lowering rather than the SIMT
// path: they leave the fast lowerings on, or they would never be reached.
var fastPathFaults = map[string]bool{failpoint.PTXReduceBarrierDropped: true}

const (
	streamThreads   = 256
	streamCTAsPerSM = 4  // 1024 threads per SM: H100 runs 2048, so registers may double first
	streamFlight    = 64 // bytes of the widest vector access a thread loads before converting
	streamMaxElems  = 32 // elements of arithmetic a thread holds per iteration
	streamMinLoads  = 4  // 16-byte loads (in bytes: 64) a thread has in flight, where registers allow
	defaultSMs      = 132
)

var streamOps = []string{"ld.global.v4.b32", "st.global.v4.b32", "ld.global.v2.f64", "st.global.v2.f64",
	"ld.global.b32", "bfe.s32", "bfe.u32", "or.b32", "cvt.rn.bf16x2.f32", "cvt.rn.f16x2.f32",
	"setp.gt.f32", "setp.eq.f32"}

func init() {
	for _, op := range streamOps {
		knownOps[op] = true
	}
}

// streamGen generates one stream module; it borrows the SIMT generator's element routines.
type streamGen struct {
	*gen
	plan *streamPlan
	gtid string // global thread index, .s32
	cta  int    // CTAs launched
}

// generateStream returns the stream module for k, or nil when matchStream does not take it.
func generateStream(k *tile.Kernel, t Target, shapes []tile.Shape) (*Module, error) {
	if !fastLoweringsOn() {
		return nil, nil
	}
	plan := matchStream(k, shapes)
	if plan == nil {
		return nil, nil
	}
	g := &gen{k: k, t: t, entry: entryName(k.Name), shapes: shapes, threads: streamThreads, bases: map[tile.Reg]string{}}
	g.lay = planLayout(k, shapes, false)
	s := &streamGen{gen: g, plan: plan}
	sms := t.SMs
	if sms <= 0 {
		sms = defaultSMs
	}
	want := 1
	for i := range plan.streams {
		v, u := s.shape(&plan.streams[i])
		want = max(want, ceilDivInt(plan.streams[i].n/v, streamThreads*u))
	}
	s.cta = min(want, sms*streamCTAsPerSM)
	text, err := s.module()
	if err != nil {
		return nil, err
	}
	return &Module{PTX: text, Entry: g.entry, Grid: [3]int{s.cta, 1, 1}, Threads: streamThreads, Path: "simt-stream"}, nil
}

// shape is a stream's vector width V (elements per chunk) and unroll U (chunks in flight).
//
// V is 16 bytes of the narrowest stored run, so every warp-wide store writes 512 contiguous
// bytes; a narrower loaded run then moves 8 or 4 bytes a chunk (a cast bf16 -> f32: 8-byte
// loads, 16-byte stores), still contiguous across the warp. With V from the narrowest load
// instead, a lane's wider outputs took two 16-byte stores 32 bytes apart, so each warp-wide
// store wrote 32 half sectors (cast bf16 -> f32 ran at 74% of copy bandwidth on the H100);
// loads so split are served whole by L1, stores are not. Without a stored run, V is 16 bytes
// of the narrowest run.
func (s *streamGen) shape(st *stream) (v, u int) {
	minSize, minStore, maxSize, loadBytes := 0, 0, 0, 0
	for _, op := range st.ops {
		for i, a := range op.acc {
			if a.vec || a.run {
				sz := s.k.Params[a.a.Param].DType.Size()
				if minSize == 0 || sz < minSize {
					minSize = sz
				}
				maxSize = max(maxSize, sz)
				if i == 0 && !isStore(op.in) {
					loadBytes += sz // per element of a chunk
				} else if minStore == 0 || sz < minStore {
					minStore = sz
				}
			}
		}
	}
	if minSize == 0 {
		return 1, 8 // no run is aligned: one element per chunk, eight in flight
	}
	v = 16 / minSize
	if minStore > 0 {
		v = 16 / minStore
	}
	// 64 bytes of the widest access a thread, and at least four 16-byte loads.
	u = max(1, streamFlight/(v*maxSize))
	if loadBytes > 0 {
		u = max(u, ceilDivInt(streamMinLoads*16, v*loadBytes))
	}
	if _, isCopy := st.ops[0].in.(tile.Copy); !isCopy {
		u = max(1, min(u, streamMaxElems/v))
	}
	return v, u
}

func isStore(in tile.Instr) bool {
	_, ok := in.(tile.Store)
	return ok
}

func (s *streamGen) module() (text string, err error) {
	defer func() {
		if r := recover(); r != nil {
			text, err = "", errs.New(errs.Internal, "ptx: kernel %s: stream generator bug: %v", s.k.Name, r)
		}
	}()
	g := s.gen
	g.e = newEmitter()
	e := g.e
	cta := g.paramsAndIDs()
	s.gtid = e.reg("r")
	e.op("mad.lo.s32", s.gtid, cta, itoa(streamThreads), g.tid)
	for i := range s.plan.streams {
		s.stream(&s.plan.streams[i])
	}
	e.op("ret")

	return g.entryText("stream lowering", s.cta, streamThreads, 0, false, e.w.String()), nil
}

// stream emits the grid-stride loop over full chunks, then the ragged tail.
func (s *streamGen) stream(st *stream) {
	e := s.e
	v, u := s.shape(st)
	nv, tail := st.n/v, st.n%v
	T := s.cta * streamThreads
	e.comment("stream of %d elements: %d chunks of %d, %d in flight per thread, tail %d", st.n, nv, v, u, tail)
	if nv > 0 {
		c := e.reg("r")
		e.op("mov.u32", c, s.gtid)
		head, done := e.label(), e.label()
		e.place(head)
		p := e.reg("p")
		e.op("setp.ge.s32", p, c, itoa(nv))
		e.opIf(p, "bra", done)
		chunks := make([]string, u)
		valid := make([]string, u)
		for k := range u {
			chunks[k] = c
			if k > 0 {
				chunks[k] = e.reg("r")
				e.op("add.s32", chunks[k], c, itoa(k*T))
				valid[k] = e.reg("p")
				e.op("setp.lt.s32", valid[k], chunks[k], itoa(nv))
			}
		}
		// All loads first, so their latencies overlap; then convert, compute and store.
		raws := make([][][]string, u)
		for k := range u {
			raws[k] = s.loads(st, chunks[k], v, valid[k])
		}
		for k := range u {
			skip := ""
			if valid[k] != "" {
				skip = e.label()
				e.opIf("!"+valid[k], "bra", skip)
			}
			s.compute(st, chunks[k], v, raws[k])
			if skip != "" {
				e.place(skip)
			}
		}
		e.op("add.s32", c, c, itoa(u*T))
		e.op("bra", head)
		e.place(done)
	}
	if tail > 0 {
		skip := e.label()
		p := e.reg("p")
		e.op("setp.ge.s32", p, s.gtid, itoa(tail))
		e.opIf(p, "bra", skip)
		// The tail is "chunk" nv*v + gtid of width 1: every access element by element.
		c := e.reg("r")
		e.op("add.s32", c, s.gtid, itoa(nv*v))
		s.compute(st, c, 1, s.loads(st, c, 1, ""))
		e.place(skip)
	}
}

// vecOK: an access moves whole 16-byte runs in a chunk of width w.
func (s *streamGen) vecOK(a streamAccess, w int) bool {
	return s.runOK(a, w) && w*s.k.Params[a.a.Param].DType.Size()%16 == 0
}

// loadVecOK: a Load moves its chunk as one run: vecOK, or a load narrower than the stored
// runs (see shape) as one 8- or 4-byte word of 32-bit words.
func (s *streamGen) loadVecOK(a streamAccess, w int) bool {
	size := s.k.Params[a.a.Param].DType.Size()
	n := w * size
	return s.vecOK(a, w) || s.runOK(a, w) && w > 1 && size <= 4 && (n == 8 || n == 4)
}

// runOK: the access is a run and a chunk of width w stays inside one of its rows.
func (s *streamGen) runOK(a streamAccess, w int) bool {
	if a.run && a.a.ColDims[len(a.a.ColDims)-1]%w != 0 {
		return false // a chunk could straddle two rows
	}
	return a.vec || a.run
}

// loads issues, under predicate ok, the raw loads of chunk c (elements c*w ... c*w+w-1) for
// every load-side access of the stream: per access, the 16-byte words of a run, or one
// register per element. Nothing is converted yet.
func (s *streamGen) loads(st *stream, c string, w int, ok string) [][]string {
	out := make([][]string, len(st.ops))
	for i, op := range st.ops {
		var a streamAccess
		switch op.in.(type) {
		case tile.Load, tile.Copy:
			a = op.acc[0]
		default:
			continue
		}
		dt := s.k.Params[a.a.Param].DType
		if _, isLoad := op.in.(tile.Load); isLoad && s.loadVecOK(a, w) || s.vecOK(a, w) {
			out[i] = s.vecLoad(a, c, w, ok)
			continue
		}
		for j := range w {
			addr := s.elemAddr(a, c, w, j)
			if _, isCopy := op.in.(tile.Copy); isCopy {
				out[i] = append(out[i], s.rawLoad(dt.Size(), addr, ok))
			} else {
				out[i] = append(out[i], s.loadBits(dt, addr, ok))
			}
		}
	}
	return out
}

// compute converts, computes and stores chunk c from its raw loads.
func (s *streamGen) compute(st *stream, c string, w int, raws [][]string) {
	vals := map[tile.Reg][]val{}
	at := func(r tile.Reg, j int) val {
		vs := vals[r]
		return vs[min(j, len(vs)-1)] // a [1, 1] constant broadcasts
	}
	for i, op := range st.ops {
		switch x := op.in.(type) {
		case tile.Copy:
			from, to := op.acc[0], op.acc[1]
			size := s.k.Params[x.From.Param].DType.Size()
			if s.vecOK(from, w) && s.vecOK(to, w) {
				s.vecStore(to, c, w, raws[i])
				continue
			}
			elems := raws[i]
			if s.vecOK(from, w) {
				elems = make([]string, w)
				for j := range w {
					elems[j] = s.unpack(size, raws[i], j, false)
				}
			}
			if s.vecOK(to, w) {
				s.vecStore(to, c, w, s.pack(size, elems))
				continue
			}
			for j := range w {
				s.rawStore(size, s.elemAddr(to, c, w, j), elems[j])
			}
		case tile.Load:
			dt := s.k.Params[x.At.Param].DType
			narrow := !s.lay.wide[x.Dst]
			vs := make([]val, w)
			for j := range w {
				if dt == numerics.BF16 && s.loadVecOK(op.acc[0], w) {
					vs[j] = s.bf16Of(raws[i], j) // exact, and f32-exact: narrow as it is
					continue
				}
				var b string
				if s.loadVecOK(op.acc[0], w) {
					b = s.bitsOf(dt, raws[i], j)
				} else {
					b = raws[i][j]
				}
				vs[j] = s.fromBits(dt, b)
				if narrow {
					vs[j] = val{s.f32of(vs[j]), true}
				}
			}
			vals[x.Dst] = vs
		case tile.Full:
			vals[x.Dst] = []val{s.constVal(x.Value, !s.lay.wide[x.Dst])}
		case tile.Unary:
			vs := make([]val, w)
			for j := range w {
				vs[j] = s.unaryVal(x.Op, x.DType, at(x.Src, j))
			}
			vals[x.Dst] = vs
		case tile.Binary:
			vs := make([]val, w)
			for j := range w {
				vs[j] = s.binaryVal(x.Op, x.DType, at(x.A, j), at(x.B, j))
			}
			vals[x.Dst] = vs
		case tile.Round:
			vs := make([]val, w)
			for j := range w {
				vs[j] = s.roundCast(x.DType, at(x.Src, j), x.Wrap)
			}
			vals[x.Dst] = vs
		case tile.Store:
			dt := s.k.Params[x.At.Param].DType
			a := op.acc[0]
			if s.vecOK(a, w) {
				s.vecStore(a, c, w, s.encodeRun(dt, w, func(j int) val { return at(x.Src, j) }))
				continue
			}
			for j := range w {
				s.encode(dt, at(x.Src, j), s.elemAddr(a, c, w, j), "")
			}
		}
	}
}

// paramsAndIDs starts a dedicated SIMT kernel (stream, reduce, transpose): every param loaded
// as a global address into g.params, %tid.x into g.tid; it returns the register of %ctaid.x.
func (g *gen) paramsAndIDs() string {
	e := g.e
	for i := range g.k.Params {
		raw := e.reg("rd")
		e.op("ld.param.u64", raw, fmt.Sprintf("[%s_p%d]", g.entry, i))
		glob := e.reg("rd")
		e.op("cvta.to.global.u64", glob, raw)
		g.params = append(g.params, glob)
	}
	g.tid = e.reg("r")
	e.op("mov.u32", g.tid, "%tid.x")
	cta := e.reg("r")
	e.op("mov.u32", cta, "%ctaid.x")
	return cta
}
