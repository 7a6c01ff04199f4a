package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func kernel(grid []int, ps []tile.Param, nregs, nvars int, body ...tile.Instr) *tile.Kernel {
	return &tile.Kernel{Name: "kt", Grid: grid, Params: ps, NumRegs: nregs, NumVars: nvars, Body: body}
}

// row is the [1, n] access of a flat buffer of n elements.
func row(param, n int) tile.Access {
	return block2D(param, 1, n, tile.C(0), tile.C(0), 1, n, true)
}

// evalRow runs body (which must leave its result in register res, shape [1,len(out)]) and
// stores that result into an f64 buffer, returning it.
func evalRow(t *testing.T, n, nregs int, res tile.Reg, ins []*tensor.Tensor, body ...tile.Instr) *tensor.Tensor {
	t.Helper()
	out := tensor.New(numerics.F64, []int{n})
	bufs := append(append([]*tensor.Tensor{}, ins...), out)
	body = append(body, tile.Store{Src: res, At: row(len(ins), n)})
	if err := runTile(kernel([]int{1}, params(bufs, len(ins)), nregs, 4, body...), 1, bufs...); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFullAndStore(t *testing.T) {
	out := tensor.New(numerics.F32, []int{2, 3})
	k := kernel([]int{1}, params([]*tensor.Tensor{out}, 0), 1, 1,
		tile.Full{Dst: 0, Rows: 2, Cols: 3, Value: 0.1},
		tile.Store{Src: 0, At: block2D(0, 2, 3, tile.C(0), tile.C(0), 2, 3, true)})
	if err := runTile(k, 1, out); err != nil {
		t.Fatal(err)
	}
	f := float64(float32(0.1)) // Store rounds to the buffer dtype
	wantValues(t, "full", out, f, f, f, f, f, f)
}

// Every bit pattern of every dtype decodes exactly (numerics.Decode) on load, and stores back
// as numerics.Encode of that value, through both the f32 and f64 register forms.
func TestLoadStoreEveryDType(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range numerics.All {
		const n = 37
		src := tensor.New(dt, []int{n})
		for i := range n {
			src.SetBits(i, rng.Uint64())
		}
		src.SetBits(0, 0)
		wide := tensor.New(numerics.F64, []int{n})
		back := tensor.New(dt, []int{n})
		bufs := []*tensor.Tensor{src, wide, back}
		k := kernel([]int{1}, params(bufs, 1, 2), 1, 1,
			tile.Load{Dst: 0, At: row(0, n)},
			tile.Store{Src: 0, At: row(1, n)},
			tile.Store{Src: 0, At: row(2, n)})
		if err := runTile(k, 1, bufs...); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			v := numerics.Decode(dt, src.Bits(i))
			if g := wide.Float64(i); !sameBits(g, v) {
				t.Errorf("%s: element %d (bits %#x) loaded as %v, want %v", dt, i, src.Bits(i), g, v)
			}
			if g, w := back.Bits(i), numerics.Encode(dt, v); g != w {
				t.Errorf("%s: element %d stored back as %#x, want %#x", dt, i, g, w)
			}
		}
	}
}

// A transposed read (rows along stride 1, cols along stride 3) and a broadcast (stride 0) over
// two collapsed col dims.
func TestLoadStridedAndBroadcast(t *testing.T) {
	x := tt(numerics.F32, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	tr := tensor.New(numerics.F64, []int{3, 2})
	bc := tensor.New(numerics.F64, []int{8})
	bufs := []*tensor.Tensor{x, tr, bc}
	k := kernel([]int{1}, params(bufs, 1, 2), 2, 1,
		tile.Load{Dst: 0, At: tile.Access{Param: 0, Base: tile.C(0), RowDims: []int{3}, RowStrides: []int{1},
			ColDims: []int{2}, ColStrides: []int{3}, RowStart: tile.C(0), ColStart: tile.C(0), Rows: 3, Cols: 2, Mask: true}},
		tile.Store{Src: 0, At: block2D(1, 3, 2, tile.C(0), tile.C(0), 3, 2, true)},
		// element c of the [1,8] tile reads x[c/4 %2 ... ]: dims [2,4] strides [3,0]
		tile.Load{Dst: 1, At: tile.Access{Param: 0, Base: tile.C(1), RowDims: []int{1}, RowStrides: []int{0},
			ColDims: []int{2, 4}, ColStrides: []int{3, 0}, RowStart: tile.C(0), ColStart: tile.C(0), Rows: 1, Cols: 8, Mask: true}},
		tile.Store{Src: 1, At: row(2, 8)})
	if err := runTile(k, 1, bufs...); err != nil {
		t.Fatal(err)
	}
	wantValues(t, "transpose", tr, 1, 4, 2, 5, 3, 6)
	wantValues(t, "broadcast", bc, 2, 2, 2, 2, 5, 5, 5, 5)
}

// The last row tile of a [5,3] buffer read as 4x4 tiles. Masked, out-of-range elements read
// Fill and are not written. Unmasked, the same elements are read and written at their computed
// offsets: the next row's data inside the buffer, NaN and dropped writes outside. That gives
// wrong results, never a crash.
func TestMaskedVsUnmaskedRaggedTile(t *testing.T) {
	x := tensor.New(numerics.F32, []int{5, 3})
	for i := range 15 {
		x.SetFloat64(i, float64(i+1))
	}
	load := func(mask bool) *tensor.Tensor {
		z := tensor.New(numerics.F32, []int{8, 4})
		bufs := []*tensor.Tensor{x, z}
		pid := tile.V(0, 4)
		k := kernel([]int{2}, params(bufs, 1), 1, 1,
			tile.Load{Dst: 0, Fill: -1, At: block2D(0, 5, 3, pid, tile.C(0), 4, 4, mask)},
			tile.Store{Src: 0, At: block2D(1, 8, 4, pid, tile.C(0), 4, 4, true)})
		if err := runTile(k, 2, bufs...); err != nil {
			t.Fatal(err)
		}
		return z
	}
	var masked, unmasked []float64
	for i := range 8 {
		for j := range 4 {
			switch {
			case i < 5 && j < 3:
				masked = append(masked, float64(3*i+j+1))
			default:
				masked = append(masked, -1)
			}
			if off := 3*i + j; off < 15 {
				unmasked = append(unmasked, float64(off+1))
			} else {
				unmasked = append(unmasked, nan)
			}
		}
	}
	wantValues(t, "masked load", load(true), masked...)
	wantValues(t, "unmasked load", load(false), unmasked...)

	// Stores: a [3,5] buffer written as two 4x4 col tiles. Unmasked, the second tile's
	// columns 5..7 of row i land on row i+1's first columns, which the first tile (run
	// earlier) already wrote.
	src := tensor.New(numerics.F32, []int{4, 8})
	for i := range 32 {
		src.SetFloat64(i, float64(100+i))
	}
	store := func(mask bool) *tensor.Tensor {
		y := tensor.New(numerics.F32, []int{3, 5})
		bufs := []*tensor.Tensor{src, y}
		pid := tile.V(0, 4)
		k := kernel([]int{2}, params(bufs, 1), 1, 1,
			tile.Load{Dst: 0, At: block2D(0, 4, 8, tile.C(0), pid, 4, 4, true)},
			tile.Store{Src: 0, At: block2D(1, 3, 5, tile.C(0), pid, 4, 4, mask)})
		// One worker: unmasked tiles overlap, so only a fixed order gives a fixed answer.
		if err := runTile(k, 1, bufs...); err != nil {
			t.Fatal(err)
		}
		return y
	}
	wantMasked := make([]float64, 15)
	wantUnmasked := make([]float64, 15)
	for g := range 2 {
		for i := range 4 {
			for c := range 4 {
				j := 4*g + c
				if i < 3 && j < 5 {
					wantMasked[5*i+j] = float64(100 + 8*i + j)
				}
				if off := 5*i + j; off < 15 {
					wantUnmasked[off] = float64(100 + 8*i + j) // later writes win
				}
			}
		}
	}
	wantValues(t, "masked store", store(true), wantMasked...)
	wantValues(t, "unmasked store", store(false), wantUnmasked...)
	if wantUnmasked[5] == wantMasked[5] {
		t.Error("unmasked and masked stores agree at element 5; the test no longer distinguishes them")
	}
}

func TestUnary(t *testing.T) {
	e, one := math.Exp(1), 1.0 // variables, so expected values are not folded at compile time
	cases := []struct {
		op   tile.UnaryOp
		dt   numerics.DType
		x    []float64
		want []float64
	}{
		{tile.Neg, numerics.F64, []float64{1.5, 0, negz}, []float64{-1.5, negz, 0}},
		{tile.Abs, numerics.F32, []float64{-2, negz}, []float64{2, 0}},
		{tile.Relu, numerics.F32, []float64{-2, negz, 3, nan}, []float64{0, 0, 3, nan}},
		{tile.Exp, numerics.F32, []float64{1, math.Inf(-1)}, []float64{float64(float32(e)), 0}},
		{tile.Exp, numerics.F64, []float64{1}, []float64{e}},
		{tile.Log, numerics.F64, []float64{0, -1, e}, []float64{math.Inf(-1), nan, 1}},
		{tile.Sqrt, numerics.F32, []float64{2}, []float64{float64(float32(math.Sqrt2))}},
		{tile.Rsqrt, numerics.F64, []float64{4, 0}, []float64{0.5, inf}},
		{tile.Recip, numerics.F64, []float64{4, negz}, []float64{0.25, math.Inf(-1)}},
		{tile.Tanh, numerics.F64, []float64{0, inf}, []float64{0, 1}},
		{tile.Sigmoid, numerics.F64, []float64{0, -1000, 1000}, []float64{0.5, 0, 1}},
		{tile.Silu, numerics.F64, []float64{0, 2}, []float64{0, 2 / (1 + math.Exp(-2))}},
		{tile.GeluErf, numerics.F64, []float64{1}, []float64{0.5 * one * (1 + math.Erf(one/math.Sqrt2))}},
		{tile.GeluTanh, numerics.F64, []float64{1}, []float64{0.5 * one * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(one+float64(0.044715*one*one*one))))}},
		{tile.Exp, numerics.BF16, []float64{1}, []float64{2.71875}},
		{tile.Neg, numerics.I8, []float64{-128, 5}, []float64{-128, -5}},
		{tile.Abs, numerics.I8, []float64{-128, -7}, []float64{-128, 7}},
		{tile.Relu, numerics.I32, []float64{-3, 4}, []float64{0, 4}},
	}
	for _, c := range cases {
		n := len(c.x)
		x := tt(numerics.F64, []int{n}, c.x...)
		got := evalRow(t, n, 2, 1, []*tensor.Tensor{x},
			tile.Load{Dst: 0, At: row(0, n)},
			tile.Unary{Dst: 1, Src: 0, Op: c.op, DType: c.dt})
		wantValues(t, string(c.op)+"/"+c.dt.String(), got, c.want...)
	}
}

func TestBinaryBroadcastAndRounding(t *testing.T) {
	a := tt(numerics.F64, []int{6}, 1, 2, 3, 4, 5, 6)
	b := tt(numerics.F64, []int{6}, 10, 20, 30, 40, 50, 60)
	// A is [2,3]; B is read as [2,3], [2,1] (10, 40), [1,3] (10, 20, 30) and [1,1] (10).
	shapes := []struct {
		r, c int
		want []float64
	}{
		{2, 3, []float64{11, 22, 33, 44, 55, 66}},
		{2, 1, []float64{11, 12, 13, 44, 45, 46}},
		{1, 3, []float64{11, 22, 33, 14, 25, 36}},
		{1, 1, []float64{11, 12, 13, 14, 15, 16}},
	}
	for _, s := range shapes {
		bAt := tile.Access{Param: 1, Base: tile.C(0), RowDims: []int{s.r}, RowStrides: []int{3}, ColDims: []int{s.c},
			ColStrides: []int{1}, RowStart: tile.C(0), ColStart: tile.C(0), Rows: s.r, Cols: s.c, Mask: true}
		out := tensor.New(numerics.F64, []int{6})
		bufs := []*tensor.Tensor{a, b, out}
		k := kernel([]int{1}, params(bufs, 2), 3, 1,
			tile.Load{Dst: 0, At: block2D(0, 2, 3, tile.C(0), tile.C(0), 2, 3, true)},
			tile.Load{Dst: 1, At: bAt},
			tile.Binary{Dst: 2, A: 0, B: 1, Op: tile.Add, DType: numerics.F64},
			tile.Store{Src: 2, At: block2D(2, 2, 3, tile.C(0), tile.C(0), 2, 3, true)})
		if err := runTile(k, 1, bufs...); err != nil {
			t.Fatal(err)
		}
		wantValues(t, "broadcast", out, s.want...)
	}

	p1, p2 := 0.1, 0.2
	cases := []struct {
		op   tile.BinaryOp
		dt   numerics.DType
		a, b []float64
		want []float64
	}{
		{tile.Add, numerics.F32, []float64{0.1}, []float64{0.2}, []float64{float64(float32(p1 + p2))}},
		{tile.Add, numerics.F64, []float64{0.1}, []float64{0.2}, []float64{p1 + p2}},
		{tile.Sub, numerics.F32, []float64{1}, []float64{1}, []float64{0}},
		{tile.Div, numerics.F64, []float64{1, -1, 0}, []float64{0, 0, 0}, []float64{inf, math.Inf(-1), nan}},
		{tile.Max, numerics.F32, []float64{negz, 0, nan, 1}, []float64{0, negz, 1, nan}, []float64{0, 0, nan, nan}},
		{tile.Min, numerics.F32, []float64{negz, 0, nan, 1}, []float64{0, negz, 1, 2}, []float64{negz, negz, nan, 1}},
		{tile.Add, numerics.I8, []float64{127, -128}, []float64{1, -1}, []float64{-128, 127}},
		{tile.Mul, numerics.I32, []float64{65536}, []float64{65536}, []float64{0}},
		{tile.Div, numerics.I32, []float64{7, -7, 3}, []float64{2, 2, 0}, []float64{3, -3, 0}},
		{tile.Max, numerics.I8, []float64{-5}, []float64{3}, []float64{3}},
		{tile.Mul, numerics.BF16, []float64{1.00390625}, []float64{1.00390625}, []float64{1.0078125}},
	}
	for _, c := range cases {
		n := len(c.a)
		got := evalRow(t, n, 3, 2, []*tensor.Tensor{tt(numerics.F64, []int{n}, c.a...), tt(numerics.F64, []int{n}, c.b...)},
			tile.Load{Dst: 0, At: row(0, n)},
			tile.Load{Dst: 1, At: row(1, n)},
			tile.Binary{Dst: 2, A: 0, B: 1, Op: c.op, DType: c.dt})
		wantValues(t, string(c.op)+"/"+c.dt.String(), got, c.want...)
	}
}

// Binary writing over one of its operands (Dst == A) is well defined.
func TestBinaryInPlace(t *testing.T) {
	got := evalRow(t, 3, 2, 0, []*tensor.Tensor{tt(numerics.F64, []int{3}, 1, 2, 3)},
		tile.Load{Dst: 0, At: row(0, 3)},
		tile.Full{Dst: 1, Rows: 1, Cols: 1, Value: 10},
		tile.Binary{Dst: 0, A: 0, B: 1, Op: tile.Mul, DType: numerics.F64},
		tile.Binary{Dst: 0, A: 1, B: 0, Op: tile.Sub, DType: numerics.F64})
	wantValues(t, "in place", got, 0, -10, -20)
}

func TestRoundIsCast(t *testing.T) {
	x := []float64{300.7, -300.7, nan, 2.5, -0.9, 1 + 1.0/512}
	cases := []struct {
		dt   numerics.DType
		want []float64
	}{
		{numerics.I8, []float64{127, -128, 0, 2, 0, 1}},
		{numerics.BF16, []float64{300, -300, nan, 2.5, -0.8984375, 1}},
		{numerics.Bool, []float64{1, 1, 1, 1, 1, 1}},
		{numerics.F8E4M3, []float64{288, -288, nan, 2.5, -0.875, 1}},
	}
	for _, c := range cases {
		got := evalRow(t, len(x), 2, 1, []*tensor.Tensor{tt(numerics.F64, []int{len(x)}, x...)},
			tile.Load{Dst: 0, At: row(0, len(x))},
			tile.Round{Dst: 1, Src: 0, DType: c.dt})
		wantValues(t, "round/"+c.dt.String(), got, c.want...)
	}
}

// Sums fold left to right with every step rounded: in f32, 1e8+1 rounds back to 1e8.
func TestReduceOrderAndRounding(t *testing.T) {
	cases := []struct {
		op   tile.ReduceOp
		dt   numerics.DType
		x    []float64
		want float64
	}{
		{tile.Sum, numerics.F32, []float64{1e8, 1, -1e8}, 0},
		{tile.Sum, numerics.F32, []float64{1e8, -1e8, 1}, 1},
		{tile.Sum, numerics.F64, []float64{1e8, 1, -1e8}, 1},
		{tile.Sum, numerics.F32, []float64{negz, negz}, negz},
		{tile.Sum, numerics.I8, []float64{100, 100, -100}, 100},
		{tile.Sum, numerics.BF16, []float64{256, 1, 1}, 256},
		{tile.MaxRed, numerics.F32, []float64{1, nan, 3}, nan},
		{tile.MaxRed, numerics.F32, []float64{negz, 0, -1}, 0},
	}
	for _, c := range cases {
		n := len(c.x)
		got := evalRow(t, 1, 2, 1, []*tensor.Tensor{tt(numerics.F64, []int{n}, c.x...)},
			tile.Load{Dst: 0, At: row(0, n)},
			tile.Reduce{Dst: 1, Src: 0, Op: c.op, DType: c.dt})
		wantValues(t, string(c.op)+"/"+c.dt.String(), got, c.want)
	}
}

func TestMaskScoresAndMaskCols(t *testing.T) {
	ninf := math.Inf(-1)
	x := tt(numerics.F64, []int{9}, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	run := func(in tile.Instr) *tensor.Tensor {
		out := tensor.New(numerics.F64, []int{9})
		bufs := []*tensor.Tensor{x, out}
		k := kernel([]int{1}, params(bufs, 1), 2, 1,
			tile.Load{Dst: 0, At: block2D(0, 3, 3, tile.C(0), tile.C(0), 3, 3, true)},
			in,
			tile.Store{Src: 1, At: block2D(1, 3, 3, tile.C(0), tile.C(0), 3, 3, true)})
		if err := runTile(k, 1, bufs...); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Query rows start at 1, key cols at 0, 3 keys exist but only 2 are valid.
	wantValues(t, "causal", run(tile.MaskScores{Dst: 1, Src: 0, RowStart: tile.C(1), ColStart: tile.C(0), ColLimit: 2, Causal: true}),
		1, 2, ninf, 4, 5, ninf, 7, 8, ninf)
	wantValues(t, "causal-offset", run(tile.MaskScores{Dst: 1, Src: 0, RowStart: tile.C(0), ColStart: tile.C(0), ColLimit: 3, Causal: true}),
		1, ninf, ninf, 4, 5, ninf, 7, 8, 9)
	wantValues(t, "maskcols", run(tile.MaskCols{Dst: 1, Src: 0, ColStart: tile.C(1), ColLimit: 3, Value: 0}),
		1, 2, 0, 4, 5, 0, 7, 8, 0)
}

func TestForLoopsInOrder(t *testing.T) {
	// acc = acc*10 + x[v] over v = 0..3 gives 1234 only in increasing order.
	got := evalRow(t, 1, 3, 0, []*tensor.Tensor{tt(numerics.F64, []int{4}, 1, 2, 3, 4)},
		tile.Full{Dst: 0, Rows: 1, Cols: 1, Value: 0},
		tile.Full{Dst: 1, Rows: 1, Cols: 1, Value: 10},
		tile.For{Var: 1, Count: 4, Body: []tile.Instr{
			tile.Binary{Dst: 0, A: 0, B: 1, Op: tile.Mul, DType: numerics.F64},
			tile.Load{Dst: 2, At: tile.Access{Param: 0, Base: tile.V(1, 1), RowDims: []int{1}, RowStrides: []int{0},
				ColDims: []int{1}, ColStrides: []int{0}, RowStart: tile.C(0), ColStart: tile.C(0), Rows: 1, Cols: 1, Mask: true}},
			tile.Binary{Dst: 0, A: 0, B: 2, Op: tile.Add, DType: numerics.F64},
		}})
	wantValues(t, "loop", got, 1234)
}
