package ptx

import (
	"fmt"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The reduction lowering ("simt-reduce"): the kernels lowerReduce (engine/compiler) emits for
// reduce_sum, reduce_max and reduce_mean over any axes.
//
// Order. The Tile IR fixes the order: per output row, each tile of cn columns is folded left
// to right from its first element (tile.Reduce), and the tile partials are combined into the
// accumulator in tile order (a = a + p0, then + p1, ...). The SIMT path and the CPU backend
// follow it, so both give the same bits. This lowering keeps exactly that order and only
// changes who does what: every (row, tile) fold runs in its own thread, up to 256 tiles of a
// row at once (more in rounds), and one thread per row then combines the partials, read from
// shared memory, in tile order. The order depends only on the kernel's tile shape (the schedule), never on the grid
// or the SM count, so the bits equal the SIMT path's and the CPU backend's. Masked padding
// columns (Fill: +0 for sums, the dtype's lowest for max) are skipped: adding +0 or taking the
// max with the lowest value changes no partial that reaches the accumulator (a sum's
// accumulator starts at +0 and so is never -0, and x + (±0) = x for x != -0).
//
// Bandwidth. A thread holds W adjacent output rows or V adjacent columns of its tile, so a
// load is 16 bytes: for a reduction over the last axis ("rows") a tile's contiguous columns
// are walked with 16-byte loads by a lane pair (below); for one over a leading axis
// ("columns") the output rows are contiguous and a thread loads W of them per column, a warp
// covering whole lines.
//
// Lane pairs. Over rows, a lane walking its own tile alone made every warp-wide 16-byte load
// touch 32 sectors 1 KiB or a row apart, each half used (the other half came with the next
// load, through L1): twice the sector requests per byte, and the row reductions ran at 61% of
// copy bandwidth on the H100. So two lanes share a tile: each loads one half of a 32-byte
// sector, a shfl.sync hands the odd lane's half to the even lane, which folds its half, then
// the odd lane's: the same left-to-right order, so the same bits. The pair's lanes stay
// together (every branch depends on the tile only), and their shuffles name just the two.

const (
	reduceThreads = 256 // tiles of one row folded at once: up to one per thread (lane pair)
	reduceUnroll  = 4   // 16-byte loads a thread issues before folding them
	// Along a contiguous folded axis a thread's loads are 16 bytes of a 128-byte line whose
	// rest only it reads: eight in flight cover the whole line at once.
	reduceUnrollRows = 8
)

// generateReduce returns the reduction module for k, or nil when matchReduce does not take it.
func generateReduce(k *tile.Kernel, t Target, shapes []tile.Shape) (*Module, error) {
	if !fastLoweringsOn() {
		return nil, nil
	}
	p := matchReduce(k, shapes)
	if p == nil {
		return nil, nil
	}
	g := &gen{k: k, t: t, entry: entryName(k.Name), shapes: shapes, threads: reduceThreads, bases: map[tile.Reg]string{}}
	g.lay = planLayout(k, shapes, false)
	rowsPerCTA := p.grp * p.w
	ctas := ceilDivInt(p.outer, rowsPerCTA)
	shared := p.slots * rowsPerCTA * 8
	text, err := reduceModule(g, p, ctas, shared)
	if err != nil {
		return nil, err
	}
	tileDesc := fmt.Sprintf("reduce %d slots x %d row groups, %d rows x %d cols per load", p.slots, p.grp, p.w, p.v)
	if p.pair {
		tileDesc += ", 2 lanes a tile"
	}
	return &Module{PTX: text, Entry: g.entry, Grid: [3]int{ctas, 1, 1}, Threads: reduceThreads, SharedBytes: shared, Path: "simt-reduce",
		Tile: tileDesc}, nil
}

func reduceModule(g *gen, p *reducePlan, ctas, shared int) (text string, err error) {
	defer func() {
		if r := recover(); r != nil {
			text, err = "", errs.New(errs.Internal, "ptx: kernel %s: reduce generator bug: %v", g.k.Name, r)
		}
	}()
	g.e = newEmitter()
	g.pro = g.e
	e := g.e
	cta := g.paramsAndIDs()
	g.smem = e.reg("r")
	e.op("mov.u32", g.smem, "tq_smem")
	rowsPerCTA := p.grp * p.w
	// unit: the thread, or with lane pairs the pair, that folds one (row group, tile).
	unit, even, mask := g.tid, "", ""
	if p.pair {
		unit = e.reg("r")
		e.op("shr.u32", unit, g.tid, "1")
		odd := e.reg("r")
		e.op("and.b32", odd, g.tid, "1")
		oddP := e.reg("p")
		e.op("setp.ne.u32", oddP, odd, "0")
		even = "!" + oddP
		// The pair's member mask for shfl.sync: its lanes may take branches other pairs don't.
		sh, three := e.reg("r"), e.reg("r")
		e.op("and.b32", sh, g.tid, "30")
		e.op("mov.u32", three, "3")
		mask = e.reg("r")
		e.op("shl.b32", mask, three, sh)
	}
	rg := e.reg("r")
	e.op("rem.u32", rg, unit, itoa(p.grp))
	slot := e.reg("r")
	e.op("div.u32", slot, unit, itoa(p.grp))
	row0 := e.reg("r") // first row of this thread's group
	e.op("mad.lo.s32", row0, cta, itoa(rowsPerCTA), g.mul32(rg, p.w))
	// Combining: thread t adds up rows t, t+256, ... of the CTA (W rows a group can make
	// the CTA's rows outnumber its threads), each with its own accumulator.
	type combined struct {
		row, ok, notOK, acc string
		k                   int // row index inside the CTA is tid + 256k
	}
	m := ptxArith{e}
	var comb []combined
	for k := 0; k*reduceThreads < rowsPerCTA; k++ {
		lr := g.add32(g.tid, itoa(k*reduceThreads))
		row := e.reg("r")
		e.op("mad.lo.s32", row, cta, itoa(rowsPerCTA), lr)
		pc, pr, ok, nok := e.reg("p"), e.reg("p"), e.reg("p"), e.reg("p")
		e.op("setp.lt.u32", pc, lr, itoa(rowsPerCTA))
		e.op("setp.lt.s32", pr, row, itoa(p.outer))
		e.op("and.pred", ok, pc, pr)
		e.op("not.pred", nok, ok)
		comb = append(comb, combined{row: row, ok: ok, notOK: nok, acc: m.f(p.init), k: k})
	}
	part := e.reg("r")
	e.op("mad.lo.s32", part, slot, itoa(rowsPerCTA*8), g.mul32(rg, p.w*8))
	e.op("add.s32", part, part, g.smem)

	rounds := ceilDivInt(p.steps, p.slots)
	round := e.reg("r")
	e.op("mov.u32", round, "0")
	head := e.label()
	e.place(head)
	kt := e.reg("r")
	e.op("mad.lo.s32", kt, round, itoa(p.slots), slot)
	// Fold phase: this thread's tile kt of its W rows, partials to shared memory.
	skip := e.label()
	q1, q2, q := e.reg("p"), e.reg("p"), e.reg("p")
	e.op("setp.ge.s32", q1, kt, itoa(p.steps))
	e.op("setp.ge.s32", q2, row0, itoa(p.outer))
	e.op("or.pred", q, q1, q2)
	e.opIf(q, "bra", skip)
	for w, part64 := range foldTile(g, p, row0, kt, mask) {
		e.opIf(even, "st.shared.f64", fmt.Sprintf("[%s+%d]", part, 8*w), part64) // the even lane's fold is the tile's
	}
	e.place(skip)
	// The planted fault failpoint.PTXReduceBarrierDropped: the combine phase reads partials
	// other warps may not have stored yet.
	if !failpoint.Enabled(failpoint.PTXReduceBarrierDropped) {
		e.op("bar.sync", "0")
	}
	// Combine phase: one thread per row adds this round's partials in tile order.
	for _, c := range comb {
		done := e.label()
		e.opIf(c.notOK, "bra", done)
		caddr := e.reg("r")
		e.op("mad.lo.s32", caddr, g.add32(g.tid, itoa(c.k*reduceThreads)), "8", g.smem)
		for s := range p.slots {
			k2 := e.reg("r")
			e.op("mad.lo.s32", k2, round, itoa(p.slots), itoa(s))
			ps := e.reg("p")
			e.op("setp.ge.s32", ps, k2, itoa(p.steps))
			e.opIf(ps, "bra", done)
			pv := e.reg("fd")
			e.op("ld.shared.f64", pv, fmt.Sprintf("[%s+%d]", caddr, s*rowsPerCTA*8))
			r := g.binaryVal(p.comb.Op, p.comb.DType, val{c.acc, false}, val{pv, false})
			g.assign("fd", c.acc, g.f64of(r))
		}
		e.place(done)
	}
	e.op("bar.sync", "0")
	e.op("add.s32", round, round, "1")
	more := e.reg("p")
	e.op("setp.lt.s32", more, round, itoa(rounds))
	e.opIf(more, "bra", head)

	// Per-row arithmetic after the loop and the store, by the combining threads.
	for _, c := range comb {
		end := e.label()
		e.opIf(c.notOK, "bra", end)
		reducePost(g, p, c.row, c.acc)
		e.place(end)
	}
	e.op("ret")

	return g.entryText("reduction lowering", ctas, reduceThreads, shared, true, e.w.String()), nil
}

// reducePost runs the per-row instructions after the loop for row (its accumulator acc, an
// f64) and stores the row's result.
func reducePost(g *gen, p *reducePlan, row, acc string) {
	e := g.e
	vals := map[tile.Reg]val{p.comb.Dst: {acc, false}}
	for _, in := range p.post {
		switch x := in.(type) {
		case tile.Full:
			vals[x.Dst] = g.constVal(x.Value, false)
		case tile.Binary:
			vals[x.Dst] = g.binaryVal(x.Op, x.DType, vals[x.A], vals[x.B])
		case tile.Round:
			vals[x.Dst] = g.roundCast(x.DType, vals[x.Src], x.Wrap)
		case tile.Unary:
			vals[x.Dst] = g.unaryVal(x.Op, x.DType, vals[x.Src])
		case tile.Store:
			st := x.At
			off := g.unravel(row, st.RowDims, st.RowStrides)
			if st.Base.Const != 0 {
				o := e.reg("rd")
				e.op("add.s64", o, off, itoa(st.Base.Const))
				off = o
			}
			g.encode(g.k.Params[st.Param].DType, vals[x.Src], g.globalAddr(st.Param, off), "")
		}
	}
}

// foldTile folds tile kt of rows row0 .. row0+W-1 left to right from the tile's first column,
// each step rounded as tile.Reduce rounds it (the SIMT path's rows.go reduce), and returns the
// W partials as f64 registers.
//
// With lane pairs (p.pair; mask holds the pair's two lanes) both lanes run it on the same
// tile: pair block b is the V-blocks 2b (the even lane loads it) and 2b+1 (the odd lane), one
// 32-byte sector for the two; after a shfl each lane also holds its partner's half, and the
// even lane folds its own half, then the odd lane's: the tile's order. The odd lane's fold
// (halves swapped) is discarded.
func foldTile(g *gen, p *reducePlan, row0, kt, mask string) []string {
	e := g.e
	m := ptxArith{e}
	a := p.load.At
	dt := g.k.Params[a.Param].DType
	size := dt.Size()
	narrow := !g.lay.wide[p.t]
	c0 := g.mul32(kt, p.cn) // first column of the tile
	// Columns of this tile that exist: cn, or fewer in the last tile.
	valid := e.reg("r")
	e.op("mov.u32", valid, itoa(p.inner))
	e.op("sub.s32", valid, valid, c0)
	e.op("min.s32", valid, valid, itoa(p.cn))
	blocks := e.reg("r") // loads per row group: valid / V
	e.op("div.u32", blocks, valid, itoa(p.v))
	// The loop runs over pair blocks (two V-blocks) with lane pairs, else over V-blocks.
	half, loopN := "", blocks
	if p.pair {
		half = e.reg("r")
		e.op("and.b32", half, g.tid, "1")
		loopN = e.reg("r")
		e.op("add.s32", loopN, blocks, "1")
		e.op("shr.u32", loopN, loopN, "1")
	}

	// load returns the elements of block b (columns c0+b*V ..): V of one row or one of W rows.
	// W > 1 only where rows are contiguous: the group's rows follow its first.
	rowOff := []string{g.unravel(row0, a.RowDims, a.RowStrides)}
	// rowElem is the element offset of column offset off in the current row: the row's offset
	// and the access's constant base added.
	rowElem := func(off string) string {
		o := e.reg("rd")
		e.op("add.s64", o, off, rowOff[0])
		if a.Base.Const != 0 {
			o2 := e.reg("rd")
			e.op("add.s64", o2, o, itoa(a.Base.Const))
			o = o2
		}
		return o
	}
	issue := func(b string, ok string) []string {
		if p.pair { // V-block 2b + half, loaded when it exists
			vb := e.reg("r")
			e.op("mad.lo.s32", vb, b, "2", half)
			in := e.reg("p")
			e.op("setp.lt.s32", in, vb, blocks)
			if ok != "" {
				e.op("and.pred", in, in, ok)
			}
			b, ok = vb, in
		}
		col := e.reg("r")
		e.op("mad.lo.s32", col, b, itoa(p.v), c0)
		if p.v*p.w > 1 {
			off := e.reg("rd")
			if p.v > 1 {
				e.op("cvt.s64.s32", off, col) // contiguous columns
			} else {
				off = g.unravel(col, a.ColDims, a.ColStrides)
			}
			at := g.globalAddr(a.Param, rowElem(off))
			if size == 8 {
				d := []string{e.reg("fd"), e.reg("fd")}
				e.opIf(ok, "ld.global.v2.f64", "{"+strings.Join(d, ",")+"}", "["+at+"]")
				return d
			}
			d := []string{e.reg("r"), e.reg("r"), e.reg("r"), e.reg("r")}
			e.opIf(ok, "ld.global.v4.b32", "{"+strings.Join(d, ",")+"}", "["+at+"]")
			return d
		}
		return []string{g.loadBits(dt, g.globalAddr(a.Param, rowElem(g.unravel(col, a.ColDims, a.ColStrides))), ok)}
	}
	elem := func(raw []string, j int) val {
		var bits string
		if p.v*p.w > 1 {
			bits = (&streamGen{gen: g}).bitsOf(dt, raw, j)
		} else {
			bits = raw[0]
		}
		v := g.fromBits(dt, bits)
		if narrow {
			v = val{g.f32of(v), true}
		}
		return v
	}
	per := p.v * p.w // elements per load
	// The accumulators: as rows.go's reduce keeps them, per row of the group.
	type accum struct {
		cls, reg string
	}
	accs := make([]accum, p.w)
	// A max over f32-exact values with an f32 accumulator whose NaNs are stored canonical
	// folds in f32: the same values and signed zeros as the f64 fmaxmin, only a NaN's payload
	// may differ, and no output keeps it.
	f32max := p.op == tile.MaxRed && p.acc == numerics.F32 && p.outDT != numerics.F64
	first := func(w int, x val) {
		switch {
		case f32max && x.narrow:
			accs[w] = accum{"fmax", g.carried("f", x.reg)}
		case p.op == tile.MaxRed:
			accs[w] = accum{"fd", g.carried("fd", g.f64of(x))}
		case p.acc.IsInt():
			accs[w] = accum{"rd", g.carried("rd", g.wrapInt(p.acc, g.toInt(x)))}
		case p.acc == numerics.F32 && x.narrow:
			accs[w] = accum{"f", g.carried("f", x.reg)}
		case p.acc == numerics.F64:
			accs[w] = accum{"fd", g.carried("fd", g.f64of(x))}
		default:
			accs[w] = accum{"fd", g.carried("fd", g.f64of(g.roundTo(p.acc, x)))}
		}
	}
	step := func(w int, x val) {
		acc := accs[w].reg
		switch {
		case accs[w].cls == "fmax" && x.narrow:
			g.assign("f", acc, fmax32(e, acc, x.reg))
		case accs[w].cls == "fmax":
			panic("an f32 max fold met a value that is not f32-exact")
		case p.op == tile.MaxRed:
			g.assign("fd", acc, fmaxmin(m, acc, g.f64of(x), true))
		case p.acc.IsInt():
			s := e.reg("rd")
			e.op("add.s64", s, acc, g.toInt(x))
			g.assign("rd", acc, g.wrapInt(p.acc, s))
		case accs[w].cls == "f":
			s := e.reg("f")
			e.op("add.rn.f32", s, acc, x.reg)
			g.assign("f", acc, s)
		case p.acc == numerics.F64:
			g.assign("fd", acc, m.add(acc, g.f64of(x)))
		default:
			g.assign("fd", acc, g.f64of(g.roundTo(p.acc, val{m.add(acc, g.f64of(x)), false})))
		}
	}
	// element j of a load belongs to row j (W rows) or is column j (V columns) of row 0.
	rowOf := func(j int) int {
		if p.w > 1 {
			return j
		}
		return 0
	}
	// exchange: the partner lane's registers of a load (lane pairs).
	exchange := func(raw []string) []string {
		out := make([]string, len(raw))
		for i, r := range raw {
			out[i] = e.reg("r")
			e.op("shfl.sync.bfly.b32", out[i], r, "1", "31", mask)
		}
		return out
	}
	head, out := e.label(), e.label()
	// partner folds the odd lane's half of pair block b when that V-block exists; a pair
	// block without it is the last one, so the fold ends.
	partner := func(b string, raw []string) {
		vb := e.reg("r")
		e.op("mad.lo.s32", vb, b, "2", "1")
		none := e.reg("p")
		e.op("setp.ge.s32", none, vb, blocks)
		e.opIf(none, "bra", out)
		rcv := exchange(raw)
		for j := range per {
			step(rowOf(j), elem(rcv, j))
		}
	}
	// Block 0: the first element of each row starts its accumulator.
	zero := e.reg("r")
	e.op("mov.u32", zero, "0")
	raw0 := issue(zero, "")
	for j := range per {
		if p.w > 1 || j == 0 {
			first(rowOf(j), elem(raw0, j))
		} else {
			step(0, elem(raw0, j))
		}
	}
	if p.pair {
		partner(zero, raw0)
	}
	// Blocks 1 ..: reduceUnroll loads in flight, then folded in order.
	b := e.reg("r")
	e.op("mov.u32", b, "1")
	e.place(head)
	pb := e.reg("p")
	e.op("setp.ge.s32", pb, b, loopN)
	e.opIf(pb, "bra", out)
	unroll := reduceUnroll
	if p.v > 1 {
		unroll = reduceUnrollRows
	}
	raws := make([][]string, unroll)
	oks, bus := make([]string, unroll), make([]string, unroll)
	for u := range unroll {
		bu := b
		if u > 0 {
			bu = g.add32(b, itoa(u))
			oks[u] = e.reg("p")
			e.op("setp.lt.s32", oks[u], bu, loopN)
		}
		bus[u] = bu
		raws[u] = issue(bu, oks[u])
	}
	for u := range unroll {
		if u > 0 {
			// Blocks past the end were not loaded; they are also the last ones, so leave.
			nok := e.reg("p")
			e.op("not.pred", nok, oks[u])
			e.opIf(nok, "bra", out)
		}
		for j := range per {
			step(rowOf(j), elem(raws[u], j))
		}
		if p.pair {
			partner(bus[u], raws[u])
		}
	}
	e.op("add.s32", b, b, itoa(unroll))
	e.op("bra", head)
	e.place(out)
	// Each partial as tile.Reduce leaves it (rows.go's out), then as an f64.
	res := make([]string, p.w)
	for w, acc := range accs {
		var v val
		switch {
		case acc.cls == "fmax":
			v = val{acc.reg, true}
		case p.op == tile.MaxRed:
			v = g.roundTo(p.acc, val{acc.reg, false})
		case p.acc.IsInt():
			v = g.intVal(acc.reg)
		case acc.cls == "f":
			v = val{acc.reg, true}
		default:
			v = val{acc.reg, false}
		}
		res[w] = g.f64of(v)
	}
	return res
}

// fmax32 is fmaxmin's max in f32: the larger, +0 over -0 (the AND of the bits), a NaN if
// either is one (their sum).
func fmax32(e *emitter, a, b string) string {
	gt, eq, nan := e.reg("p"), e.reg("p"), e.reg("p")
	e.op("setp.gt.f32", gt, a, b)
	r1 := e.reg("f")
	e.op("selp.f32", r1, a, b, gt)
	ab, bb := e.reg("r"), e.reg("r")
	e.op("mov.b32", ab, a)
	e.op("mov.b32", bb, b)
	z := e.reg("r")
	e.op("and.b32", z, ab, bb)
	zf := e.reg("f")
	e.op("mov.b32", zf, z)
	e.op("setp.eq.f32", eq, a, b)
	r2 := e.reg("f")
	e.op("selp.f32", r2, zf, r1, eq)
	e.op("setp.nan.f32", nan, a, b)
	sum := e.reg("f")
	e.op("add.rn.f32", sum, a, b)
	r3 := e.reg("f")
	e.op("selp.f32", r3, sum, r2, nan)
	return r3
}
