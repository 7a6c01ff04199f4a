package ptx

import (
	"fmt"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// The transpose lowering ("simt-transpose"): a movement kernel whose source view is a batch of
// 2-D transposes (the output's last dim B strided in the input, some dim A just before it
// contiguous there) moves 64x64 tiles through shared memory: 16-byte loads along A (coalesced
// in the input), 16-byte stores along B (coalesced in the output), the turn in shared memory
// with rows padded by one element so a column read does not hit one bank. Bits are moved,
// never decoded. Shapes whose A or B is not a multiple of the vector width, or whose strides
// break 16-byte alignment, stay on the stream lowering (element gathers).

const (
	transposeTile    = 64
	transposeThreads = 256
	transposePitch   = transposeTile + 1 // elements per shared-memory row
)

var transposeOps = []string{"ld.shared.b32", "st.shared.b32", "ld.shared.u8", "st.shared.u8"}

func init() {
	for _, op := range transposeOps {
		knownOps[op] = true
	}
}

// transposePlan is the Copy seen as out[batch][a][b] = in[base + batch + a + b*sB].
type transposePlan struct {
	from, to       int // params
	size           int // element bytes
	batchDims      []int
	batchStrides   []int
	a, b, sB, base int
	tilesA, tilesB int
	batch          int
}

func matchTranspose(k *tile.Kernel, shapes []tile.Shape) *transposePlan {
	sp := matchStream(k, shapes)
	if sp == nil || len(sp.streams) != 1 || len(k.Body) != 1 {
		return nil
	}
	op := sp.streams[0].ops[0]
	c, ok := op.in.(tile.Copy)
	if !ok || !op.acc[1].vec || c.To.Base.Const != 0 {
		return nil
	}
	f := c.From
	n := len(f.ColDims)
	if n < 2 || f.ColStrides[n-2] != 1 || f.ColStrides[n-1] == 1 {
		return nil
	}
	p := &transposePlan{from: f.Param, to: c.To.Param, size: k.Params[f.Param].DType.Size(),
		batchDims: f.ColDims[:n-2], batchStrides: f.ColStrides[:n-2],
		a: f.ColDims[n-2], b: f.ColDims[n-1], sB: f.ColStrides[n-1], base: f.Base.Const}
	v := 16 / p.size
	if p.a%v != 0 || p.b%v != 0 || p.sB*p.size%16 != 0 || p.base*p.size%16 != 0 {
		return nil
	}
	for _, s := range p.batchStrides {
		if s*p.size%16 != 0 {
			return nil
		}
	}
	p.batch = prod(p.batchDims)
	p.tilesA, p.tilesB = ceilDivInt(p.a, transposeTile), ceilDivInt(p.b, transposeTile)
	if p.batch*p.tilesA*p.tilesB > maxIndex {
		return nil
	}
	return p
}

func generateTranspose(k *tile.Kernel, t Target, shapes []tile.Shape) (*Module, error) {
	if !fastLoweringsOn() {
		return nil, nil
	}
	p := matchTranspose(k, shapes)
	if p == nil {
		return nil, nil
	}
	g := &gen{k: k, t: t, entry: entryName(k.Name), shapes: shapes, threads: transposeThreads, bases: map[tile.Reg]string{}}
	ctas := p.batch * p.tilesA * p.tilesB
	shared := transposeTile * transposePitch * p.size
	shared = (shared + 15) &^ 15
	text, err := transposeModule(g, p, ctas, shared)
	if err != nil {
		return nil, err
	}
	return &Module{PTX: text, Entry: g.entry, Grid: [3]int{ctas, 1, 1}, Threads: transposeThreads, SharedBytes: shared,
		Path: "simt-transpose", Tile: fmt.Sprintf("transpose %dx%d via shared memory", transposeTile, transposeTile)}, nil
}

func transposeModule(g *gen, p *transposePlan, ctas, shared int) (text string, err error) {
	defer func() {
		if r := recover(); r != nil {
			text, err = "", errs.New(errs.Internal, "ptx: kernel %s: transpose generator bug: %v", g.k.Name, r)
		}
	}()
	g.e = newEmitter()
	g.pro = g.e
	e := g.e
	s := &streamGen{gen: g}
	cta := g.paramsAndIDs()
	g.smem = e.reg("r")
	e.op("mov.u32", g.smem, "tq_smem")
	// CTA -> (batch, tile of A, tile of B), B fastest.
	tb := e.reg("r")
	e.op("rem.u32", tb, cta, itoa(p.tilesB))
	rest := e.reg("r")
	e.op("div.u32", rest, cta, itoa(p.tilesB))
	ta := e.reg("r")
	e.op("rem.u32", ta, rest, itoa(p.tilesA))
	bi := e.reg("r")
	e.op("div.u32", bi, rest, itoa(p.tilesA))
	a0, b0 := g.mul32(ta, transposeTile), g.mul32(tb, transposeTile)
	inBase := e.reg("rd") // element offset of (batch, 0, 0) in the input
	if len(p.batchDims) > 0 {
		inBase = g.unravel(bi, p.batchDims, p.batchStrides)
	} else {
		e.op("mov.u64", inBase, "0")
	}
	if p.base != 0 {
		o := e.reg("rd")
		e.op("add.s64", o, inBase, itoa(p.base))
		inBase = o
	}
	v := 16 / p.size
	perRow := transposeTile / v // vectors per tile row
	passes := transposeTile * perRow / transposeThreads
	ldS := map[int]string{1: "ld.shared.u8", 2: "ld.shared.b16", 4: "ld.shared.b32", 8: "ld.shared.f64"}[p.size]
	stS := map[int]string{1: "st.shared.u8", 2: "st.shared.b16", 4: "st.shared.b32", 8: "st.shared.f64"}[p.size]
	smemAt := func(row, col string) string { // tile[row][col]
		a := e.reg("r")
		e.op("mad.lo.s32", a, row, itoa(transposePitch*p.size), g.smem)
		c := e.reg("r")
		e.op("mad.lo.s32", c, col, itoa(p.size), a)
		return c
	}
	vecInsts := func(at string, regs []string, load bool, ok string) {
		per, cls := 4, "b32"
		if p.size == 8 {
			per, cls = 2, "f64"
		}
		opc := "st.global.v4." + cls
		if per == 2 {
			opc = "st.global.v2." + cls
		}
		if load {
			opc = strings.Replace(opc, "st.", "ld.", 1)
			e.opIf(ok, opc, "{"+strings.Join(regs, ",")+"}", "["+at+"]")
			return
		}
		e.opIf(ok, opc, "["+at+"]", "{"+strings.Join(regs, ",")+"}")
	}
	fresh := func() []string {
		if p.size == 8 {
			return []string{e.reg("fd"), e.reg("fd")}
		}
		return []string{e.reg("r"), e.reg("r"), e.reg("r"), e.reg("r")}
	}
	// Phase 1: tile rows are B (bb), columns A (aa); each 16-byte load is V consecutive A.
	type pending struct {
		bb, aa, ok string
		regs       []string
	}
	var loads []pending
	for it := range passes {
		q := e.reg("r")
		e.op("add.s32", q, g.tid, itoa(it*transposeThreads))
		bb, av := e.reg("r"), e.reg("r")
		e.op("div.u32", bb, q, itoa(perRow))
		e.op("rem.u32", av, q, itoa(perRow))
		aa := g.mul32(av, v)
		ai, bj := g.add32(a0, aa), g.add32(b0, bb)
		pa, pb, ok := e.reg("p"), e.reg("p"), e.reg("p")
		e.op("setp.lt.s32", pa, ai, itoa(p.a))
		e.op("setp.lt.s32", pb, bj, itoa(p.b))
		e.op("and.pred", ok, pa, pb)
		off := e.reg("rd")
		e.op("mul.wide.s32", off, bj, itoa(p.sB))
		o2 := e.reg("rd")
		e.op("cvt.s64.s32", o2, ai)
		o3 := e.reg("rd")
		e.op("add.s64", o3, off, o2)
		o4 := e.reg("rd")
		e.op("add.s64", o4, o3, inBase)
		regs := fresh()
		vecInsts(g.globalAddr(p.from, o4), regs, true, ok)
		loads = append(loads, pending{bb, aa, ok, regs})
	}
	for _, l := range loads {
		skip := e.label()
		nok := e.reg("p")
		e.op("not.pred", nok, l.ok)
		e.opIf(nok, "bra", skip)
		for j := range v {
			col := g.add32(l.aa, itoa(j))
			e.op(stS, "["+smemAt(l.bb, col)+"]", s.unpack(p.size, l.regs, j, false))
		}
		e.place(skip)
	}
	e.op("bar.sync", "0")
	// Phase 2: output row a0+aa, V consecutive B per 16-byte store, read down a tile column.
	for it := range passes {
		q := e.reg("r")
		e.op("add.s32", q, g.tid, itoa(it*transposeThreads))
		aa, bv := e.reg("r"), e.reg("r")
		e.op("div.u32", aa, q, itoa(perRow))
		e.op("rem.u32", bv, q, itoa(perRow))
		bb := g.mul32(bv, v)
		ai, bj := g.add32(a0, aa), g.add32(b0, bb)
		pa, pb, ok := e.reg("p"), e.reg("p"), e.reg("p")
		e.op("setp.lt.s32", pa, ai, itoa(p.a))
		e.op("setp.lt.s32", pb, bj, itoa(p.b))
		e.op("and.pred", ok, pa, pb)
		skip := e.label()
		nok := e.reg("p")
		e.op("not.pred", nok, ok)
		e.opIf(nok, "bra", skip)
		elems := make([]string, v)
		for j := range v {
			row := g.add32(bb, itoa(j))
			cls := map[int]string{1: "h", 2: "h", 4: "r", 8: "fd"}[p.size]
			elems[j] = e.reg(cls)
			e.op(ldS, elems[j], "["+smemAt(row, aa)+"]")
		}
		// out[((batch*A) + a)*B + b]
		rowIdx := e.reg("r")
		e.op("mad.lo.s32", rowIdx, bi, itoa(p.a), ai)
		off := e.reg("rd")
		e.op("mul.wide.s32", off, rowIdx, itoa(p.b))
		o2 := e.reg("rd")
		e.op("cvt.s64.s32", o2, bj)
		o3 := e.reg("rd")
		e.op("add.s64", o3, off, o2)
		words := s.pack(p.size, elems)
		vecInsts(g.globalAddr(p.to, o3), words, false, "")
		e.place(skip)
	}
	e.op("ret")

	return g.entryText("transpose lowering", ctas, transposeThreads, shared, true, e.w.String()), nil
}
