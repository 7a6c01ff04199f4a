package compiler

import (
	"fmt"
	"math"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// lower turns every group into one Tile IR kernel over program buffers.
func lower(s *state) error {
	p := &Program{Graph: s.g}
	bufOf := map[*graph.Value]int{}
	addBuf := func(v *graph.Value) int {
		if b, ok := bufOf[v]; ok {
			return b
		}
		bufOf[v] = len(p.Buffers)
		p.Buffers = append(p.Buffers, Buffer{Name: v.Name, Type: v.Type})
		return bufOf[v]
	}
	for _, v := range s.g.Inputs {
		p.Inputs = append(p.Inputs, addBuf(v))
	}
	for _, gr := range s.groups {
		kb := &kbuilder{k: &tile.Kernel{Name: gr.name}, prog: p, bufOf: bufOf, params: map[int]int{}}
		addBuf(gr.root().Output)
		if isEmpty(gr.root().Output) && !failpoint.Enabled(failpoint.EmptyKernelLaunched) {
			continue // lower_empty.go: nothing to write, and no backend launches a grid of 0
		}
		if needsFill(gr.root()) {
			gr.sched = fillSchedule(gr.sched, gr.root())
		}
		if err := kb.lowerGroup(gr); err != nil {
			return fmt.Errorf("lowering %s (%%%s = %s): %w", gr.name, gr.root().Output.Name, gr.root().Op, err)
		}
		p.Kernels = append(p.Kernels, kb.k)
		p.Schedules = append(p.Schedules, gr.sched)
		var names []string
		for _, n := range gr.nodes {
			names = append(names, n.Output.Name)
		}
		p.KernelNodes = append(p.KernelNodes, names)
	}
	for _, v := range s.g.Outputs {
		p.Outputs = append(p.Outputs, bufOf[v])
	}
	p.ScheduleHash = HashSchedules(p.Schedules)
	p.Log = s.log
	s.prog = p
	return nil
}

// kbuilder accumulates one kernel.
type kbuilder struct {
	k      *tile.Kernel
	prog   *Program
	bufOf  map[*graph.Value]int
	params map[int]int
	body   *[]tile.Instr
}

func (b *kbuilder) reg() tile.Reg { b.k.NumRegs++; return tile.Reg(b.k.NumRegs - 1) }

func (b *kbuilder) emit(in tile.Instr) { *b.body = append(*b.body, in) }

// grid declares the grid and returns its vars.
func (b *kbuilder) grid(dims ...int) []tile.Var {
	b.k.Grid = dims
	b.body = &b.k.Body
	vs := make([]tile.Var, len(dims))
	for i := range vs {
		vs[i] = tile.Var(i)
	}
	b.k.NumVars = len(dims)
	return vs
}

// loop emits a For over count iterations, building its body with fn.
func (b *kbuilder) loop(count int, fn func(v tile.Var)) {
	v := tile.Var(b.k.NumVars)
	b.k.NumVars++
	outer := b.body
	f := tile.For{Var: v, Count: count}
	b.body = &f.Body
	fn(v)
	b.body = outer
	b.emit(f)
}

// param returns the kernel parameter index for a graph value's buffer.
func (b *kbuilder) param(v *graph.Value, output bool) int {
	buf := b.bufOf[v]
	if i, ok := b.params[buf]; ok {
		if output {
			b.k.Params[i].Output = true
		}
		return i
	}
	b.params[buf] = len(b.k.Params)
	b.k.Params = append(b.k.Params, tile.Param{Buffer: buf, Name: v.Name, DType: v.Type.DType, Len: v.Type.NumElems(), Output: output})
	return b.params[buf]
}

func (b *kbuilder) full(rows, cols int, v float64) tile.Reg {
	r := b.reg()
	b.emit(tile.Full{Dst: r, Rows: rows, Cols: cols, Value: v})
	return r
}

func (b *kbuilder) load(at tile.Access, fill float64) tile.Reg {
	r := b.reg()
	b.emit(tile.Load{Dst: r, At: at, Fill: fill})
	return r
}

func (b *kbuilder) unary(op tile.UnaryOp, x tile.Reg, dt numerics.DType) tile.Reg {
	r := b.reg()
	b.emit(tile.Unary{Dst: r, Src: x, Op: op, DType: dt})
	return r
}

func (b *kbuilder) binary(op tile.BinaryOp, x, y tile.Reg, dt numerics.DType) tile.Reg {
	r := b.reg()
	b.emit(tile.Binary{Dst: r, A: x, B: y, Op: op, DType: dt})
	return r
}

func (b *kbuilder) reduce(op tile.ReduceOp, x tile.Reg, dt numerics.DType) tile.Reg {
	r := b.reg()
	b.emit(tile.Reduce{Dst: r, Src: x, Op: op, DType: dt})
	return r
}

func (b *kbuilder) round(x tile.Reg, dt numerics.DType) tile.Reg {
	r := b.reg()
	b.emit(tile.Round{Dst: r, Src: x, DType: dt})
	return r
}

func (b *kbuilder) lowerGroup(gr *group) error {
	n := gr.root()
	if needsFill(n) {
		return b.lowerFill(n, gr.sched)
	}
	switch n.Def().Kind {
	case graph.KindUnary, graph.KindBinary, graph.KindCast:
		return b.lowerElementwise(gr)
	case graph.KindMatmul:
		return b.lowerMatmul(n, gr.sched)
	case graph.KindAttention:
		return b.lowerAttention(n, gr.sched)
	case graph.KindAttentionGrad:
		return b.lowerAttentionGrad(n, gr.sched)
	case graph.KindReduce:
		return b.lowerReduce(n, gr.sched)
	case graph.KindRowwise:
		return b.lowerRowwise(n, gr.sched)
	case graph.KindMovement:
		return b.lowerMovement(n, gr.sched)
	case graph.KindLoss:
		return b.lowerLoss(n, gr.sched)
	case graph.KindSpectral:
		return b.lowerFFT(n, gr.sched)
	case graph.KindConv:
		return b.lowerConv(n, gr.sched)
	}
	return fmt.Errorf("no lowering for op kind of %s", n.Op)
}

// computeDType is the arithmetic dtype of elementwise work producing dt: f64 stays f64,
// other floats compute in f32, integers compute in their own (wrapping) dtype.
func computeDType(dt numerics.DType) numerics.DType {
	switch {
	case dt == numerics.F64, dt.IsInt(), dt == numerics.Bool:
		return dt
	}
	return numerics.F32
}

// accumDType is the accumulator of an accumulating node: its accum attribute, else f64 for
// f64, the int dtype itself for ints (wrapping each step equals wrapping at the end), else f32.
func accumDType(n *graph.Node) numerics.DType {
	if n.HasAttrSet("accum") {
		return n.DTypeAttr("accum")
	}
	return computeDType(n.Inputs[0].Type.DType)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// narrowTo prepares an accumulator for a store into dtype out. Store encodes with
// numerics.Encode, which saturates integers, but integer arithmetic wraps (ops.go), so an
// integer accumulator wider than the output (accum=int32 on int8) must wrap first.
func (b *kbuilder) narrowTo(r tile.Reg, acc, out numerics.DType) tile.Reg {
	if !out.IsInt() || acc == out {
		return r
	}
	d := b.reg()
	b.emit(tile.Round{Dst: d, Src: r, DType: out, Wrap: true})
	return d
}

// ---- access helpers ----

// contiguous returns row-major strides.
func contiguous(shape []int) []int { return tensor.Strides(shape) }

// collapse merges adjacent dims that are contiguous with each other in the strided view, so
// most accesses become one plain run that backends can copy fast. It never changes addresses.
func collapse(dims, strides []int) ([]int, []int) {
	if len(dims) == 0 {
		return []int{1}, []int{0}
	}
	var d, s []int
	for i := range dims {
		if dims[i] == 1 {
			continue // a size-1 dim contributes no offset
		}
		if k := len(d) - 1; k >= 0 && s[k] == strides[i]*dims[i] {
			d[k] *= dims[i]
			s[k] = strides[i]
			continue
		}
		d = append(d, dims[i])
		s = append(s, strides[i])
	}
	if len(d) == 0 {
		return []int{1}, []int{0}
	}
	return d, s
}

// broadcastStrides gives, for each dim of out, the element stride in a tensor of shape in
// broadcast to out (0 for broadcast dims).
func broadcastStrides(in, out []int) []int {
	st := contiguous(in)
	res := make([]int, len(out))
	off := len(out) - len(in)
	for i := range out {
		j := i - off
		if j < 0 || (in[j] == 1 && !failpoint.Enabled(failpoint.BroadcastSize1Stride)) {
			continue
		}
		res[i] = st[j]
	}
	return res
}

// flatTile addresses block pid of size block of a logical index space of shape dims with the
// given strides, as a [1, block] tile.
func flatTile(param int, base tile.Expr, dims, strides []int, pid tile.Var, block int) tile.Access {
	cd, cs := collapse(dims, strides)
	return tile.Access{Param: param, Base: base, RowDims: []int{1}, RowStrides: []int{0}, ColDims: cd, ColStrides: cs,
		RowStart: tile.C(0), ColStart: tile.V(pid, block), Rows: 1, Cols: block, Mask: true}
}

// ---- elementwise ----

func (b *kbuilder) lowerElementwise(gr *group) error {
	out := gr.root().Output
	shape := out.Type.Shape
	total, block := out.Type.NumElems(), gr.sched.BN
	pid := b.grid(ceilDiv(total, block))[0]
	regOf := map[*graph.Value]tile.Reg{}
	operand := func(v *graph.Value) tile.Reg {
		if r, ok := regOf[v]; ok {
			return r
		}
		r := b.load(flatTile(b.param(v, false), tile.C(0), shape, broadcastStrides(v.Type.Shape, shape), pid, block), 0)
		regOf[v] = r
		return r
	}
	for _, n := range gr.nodes {
		dt := n.Output.Type.DType
		cdt := computeDType(dt)
		var r tile.Reg
		switch n.Def().Kind {
		case graph.KindCast:
			r = b.reg()
			wrap := dt.IsInt() && (n.Inputs[0].Type.DType.IsInt() || n.Inputs[0].Type.DType == numerics.Bool) && !failpoint.Enabled(failpoint.CastIntSaturates)
			b.emit(tile.Round{Dst: r, Src: operand(n.Inputs[0]), DType: dt, Wrap: wrap})
		case graph.KindUnary:
			if n.Op == "full_like" { // a constant: x is not even loaded
				r = b.full(1, block, numerics.Round(dt, n.FloatAttr("value")))
				break
			}
			op, err := unaryOp(n)
			if err != nil {
				return err
			}
			r = b.unary(op, operand(n.Inputs[0]), cdt)
		case graph.KindBinary:
			op, bdt := binaryOpOf(n), cdt
			if op == tile.DivTrunc && (dt == numerics.F16 || dt == numerics.BF16) {
				bdt = dt // torch truncates the quotient rounded to f16/bf16, not the f32 one
			}
			r = b.binary(op, operand(n.Inputs[0]), operand(n.Inputs[1]), bdt)
		}
		// An intermediate keeps its declared dtype even though it never leaves registers.
		if n != gr.root() && cdt != dt && n.Def().Kind != graph.KindCast && !failpoint.Enabled(failpoint.FusionSkipsIntermediateRound) {
			r = b.round(r, dt)
		}
		regOf[n.Output] = r
	}
	b.emit(tile.Store{Src: regOf[out], At: flatTile(b.param(out, true), tile.C(0), shape, contiguous(shape), pid, block)})
	return nil
}

var binaryOps = map[string]tile.BinaryOp{"add": tile.Add, "sub": tile.Sub, "mul": tile.Mul, "div": tile.Div, "maximum": tile.Max, "minimum": tile.Min}

// binaryOpOf is the tile op of a binary node: div's rounding mode picks its own tile op.
func binaryOpOf(n *graph.Node) tile.BinaryOp {
	switch graph.DivRounding(n) {
	case "trunc":
		return tile.DivTrunc
	case "floor":
		return tile.DivFloor
	}
	return binaryOps[n.Op]
}

func unaryOp(n *graph.Node) (tile.UnaryOp, error) {
	switch n.Op {
	case "gelu":
		if n.StringAttr("approx") == "tanh" {
			return failpoint.Pick(failpoint.GeluApproxSwapped, tile.GeluTanh, tile.GeluErf), nil
		}
		if a := n.StringAttr("approx"); a != "erf" {
			return "", fmt.Errorf("gelu approx %q: want \"erf\" or \"tanh\"", a)
		}
		return failpoint.Pick(failpoint.GeluApproxSwapped, tile.GeluErf, tile.GeluTanh), nil
	case "neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "sign", "erf":
		return tile.UnaryOp(n.Op), nil
	}
	return "", fmt.Errorf("no tile op for %s", n.Op)
}

// ---- matmul ----

func (b *kbuilder) lowerMatmul(n *graph.Node, sc Schedule) error {
	av, bv := n.Inputs[0], n.Inputs[1]
	batch, m, nn, k, err := graph.MatmulDims(n, av.Type, bv.Type)
	if err != nil {
		return err
	}
	acc := failpoint.Pick(failpoint.MatmulAccumBF16, accumDType(n), numerics.BF16)
	asked := acc
	acc = failpoint.Apply(failpoint.MatmulNarrowAccumRoundedOnce, acc, wideInsteadOfNarrow)
	bm, bn, bk := sc.BM, sc.BN, sc.BK
	g := b.grid(batch, ceilDiv(m, bm), ceilDiv(nn, bn))
	pa, pb := b.param(av, false), b.param(bv, false)
	c := b.full(bm, bn, 0)
	// A is [M,K] row-major, or stored [K,M] when transposed: element (i,kk) sits at i*K+kk or kk*M+i.
	aRow, aCol := k, 1
	if n.BoolAttr("transpose_a") {
		aRow, aCol = 1, m
	}
	bRow, bCol := nn, 1
	// scaled_matmul's b is always stored [N,K] (K-major, as fp8 tensor cores read it).
	if (n.BoolAttr("transpose_b") || n.Op == "scaled_matmul") && !failpoint.Enabled(failpoint.MatmulTransposeBIgnored) {
		bRow, bCol = 1, k
	}
	b.loop(ceilDiv(k, bk), func(kt tile.Var) {
		a := b.load(tile.Access{Param: pa, Base: tile.V(g[0], m*k), RowDims: []int{m}, RowStrides: []int{aRow},
			ColDims: []int{k}, ColStrides: []int{aCol}, RowStart: tile.V(g[1], bm), ColStart: tile.V(kt, bk),
			Rows: bm, Cols: bk, Mask: failpoint.Pick(failpoint.MatmulKTailUnmasked, true, false)}, 0)
		bt := b.load(tile.Access{Param: pb, Base: tile.V(g[0], k*nn), RowDims: []int{k}, RowStrides: []int{bRow},
			ColDims: []int{nn}, ColStrides: []int{bCol}, RowStart: tile.V(kt, bk), ColStart: tile.V(g[2], bn),
			Rows: bk, Cols: bn, Mask: failpoint.Pick(failpoint.MatmulKTailUnmasked, true, false)}, 0)
		b.emit(tile.MMA{Acc: c, A: a, B: bt, AccDType: acc})
	})
	if acc != asked {
		c = b.round(c, asked)
	}
	if n.Op == "scaled_matmul" {
		c = b.scaleEpilogue(c, n.Inputs[2], n.Inputs[3])
	}
	c = b.narrowTo(c, acc, n.Output.Type.DType)
	b.emit(tile.Store{Src: c, At: tile.Access{Param: b.param(n.Output, true), Base: tile.V(g[0], m*nn),
		RowDims: []int{m}, RowStrides: []int{nn}, ColDims: []int{nn}, ColStrides: []int{1},
		RowStart: tile.V(g[1], bm), ColStart: tile.V(g[2], bn), Rows: bm, Cols: bn, Mask: true}})
	return nil
}

// scaleEpilogue multiplies the f32 accumulator by scale_a*scale_b, the product rounded to f32
// first (one multiplication per element, as cuBLASLt's fp8 epilogue does); the store then
// rounds once more, to the output dtype.
func (b *kbuilder) scaleEpilogue(c tile.Reg, sa, sb *graph.Value) tile.Reg {
	scalar := func(v *graph.Value) tile.Reg {
		return b.load(tile.Access{Param: b.param(v, false), Base: tile.C(0), RowDims: []int{1}, RowStrides: []int{0},
			ColDims: []int{1}, ColStrides: []int{0}, RowStart: tile.C(0), ColStart: tile.C(0), Rows: 1, Cols: 1, Mask: true}, 0)
	}
	scale := b.binary(tile.Mul, scalar(sa), scalar(sb), numerics.F32)
	return b.binary(tile.Mul, c, scale, numerics.F32)
}

// wideInsteadOfNarrow is the planted bug compiler/matmul/narrow-accum-rounded-once: a float
// accumulator narrower than f32 is replaced by f64, the sum rounded to it once at the end, as
// a kernel that accumulates on wide hardware and only converts its result would.
func wideInsteadOfNarrow(a numerics.DType) numerics.DType {
	if a.IsFloat() && a.Size() < 4 {
		return numerics.F64
	}
	return a
}

// ---- attention ----

func (b *kbuilder) lowerAttention(n *graph.Node, sc Schedule) error {
	q, k, v := n.Inputs[0], n.Inputs[1], n.Inputs[2]
	r := q.Type.Rank()
	sq, d, sk, dv := q.Type.Shape[r-2], q.Type.Shape[r-1], k.Type.Shape[r-2], v.Type.Shape[r-1]
	bh := q.Type.NumElems() / (sq * d)
	scale := 1 / math.Sqrt(float64(d))
	if n.HasAttrSet("scale") {
		scale = n.FloatAttr("scale")
	}
	acc := accumDType(n)
	bm, bn := sc.BM, sc.BN
	g := b.grid(bh, ceilDiv(sq, bm))
	qt := b.load(tile.Access{Param: b.param(q, false), Base: tile.V(g[0], sq*d), RowDims: []int{sq}, RowStrides: []int{d},
		ColDims: []int{d}, ColStrides: []int{1}, RowStart: tile.V(g[1], bm), ColStart: tile.C(0), Rows: bm, Cols: d, Mask: true}, 0)
	mx := b.full(bm, 1, math.Inf(-1))
	l := b.full(bm, 1, 0)
	o := b.full(bm, dv, 0)
	sc1 := b.full(1, 1, failpoint.Pick(failpoint.AttentionScaleSkipped, scale, 1))
	pk, pv := b.param(k, false), b.param(v, false)
	b.loop(ceilDiv(sk, bn), func(kt tile.Var) {
		// K^T tile [D, BN]: element (dd, j) of K^T is K[j, dd] at j*D+dd.
		kT := b.load(tile.Access{Param: pk, Base: tile.V(g[0], sk*d), RowDims: []int{d}, RowStrides: []int{1},
			ColDims: []int{sk}, ColStrides: []int{d}, RowStart: tile.C(0), ColStart: tile.V(kt, bn), Rows: d, Cols: bn, Mask: true}, 0)
		s := b.full(bm, bn, 0)
		b.emit(tile.MMA{Acc: s, A: qt, B: kT, AccDType: acc})
		s = b.binary(tile.Mul, s, sc1, acc)
		ms := b.reg()
		b.emit(tile.MaskScores{Dst: ms, Src: s, RowStart: failpoint.Apply(failpoint.AttentionCausalDiagonal, tile.V(g[1], bm), func(e tile.Expr) tile.Expr { return e.Plus(tile.C(-1)) }), ColStart: tile.V(kt, bn), ColLimit: sk, Causal: n.BoolAttr("causal")})
		p, alpha := b.reg(), b.reg()
		b.emit(tile.OnlineSoftmax{M: mx, L: l, X: ms, P: p, Alpha: alpha, DType: acc})
		if dt := q.Type.DType; dt == numerics.F16 || dt == numerics.BF16 {
			// Tensor-core kernels feed P to the second MMA in the storage dtype; do the same.
			p = b.round(p, dt)
		}
		b.emit(tile.Binary{Dst: o, A: o, B: alpha, Op: tile.Mul, DType: acc})
		vt := b.load(tile.Access{Param: pv, Base: tile.V(g[0], sk*dv), RowDims: []int{sk}, RowStrides: []int{dv},
			ColDims: []int{dv}, ColStrides: []int{1}, RowStart: tile.V(kt, bn), ColStart: tile.C(0), Rows: bn, Cols: dv, Mask: true}, 0)
		b.emit(tile.MMA{Acc: o, A: p, B: vt, AccDType: acc})
	})
	res := b.binary(tile.Div, o, l, acc)
	b.emit(tile.Store{Src: res, At: tile.Access{Param: b.param(n.Output, true), Base: tile.V(g[0], sq*dv), RowDims: []int{sq},
		RowStrides: []int{dv}, ColDims: []int{dv}, ColStrides: []int{1}, RowStart: tile.V(g[1], bm), ColStart: tile.C(0),
		Rows: bm, Cols: dv, Mask: true}})
	return nil
}
