package cpu

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Every product that feeds an addition is written float64(x*y) or float32(x*y): the Go spec
// lets a compiler fuse x*y+z into one FMA (arm64, ppc64, s390x do) unless an explicit
// conversion forces the product's rounding. That is what makes results identical per arch.

var knownUnary = map[tile.UnaryOp]bool{
	tile.Neg: true, tile.Abs: true, tile.Relu: true, tile.Exp: true, tile.Log: true, tile.Sqrt: true,
	tile.Rsqrt: true, tile.Tanh: true, tile.Sigmoid: true, tile.Silu: true, tile.GeluErf: true,
	tile.GeluTanh: true, tile.Recip: true, tile.Sign: true, tile.Erf: true,
}

var knownBinary = map[tile.BinaryOp]bool{
	tile.Add: true, tile.Sub: true, tile.Mul: true, tile.Div: true, tile.Max: true, tile.Min: true,
	tile.DivTrunc: true, tile.DivFloor: true,
}

// roundTo rounds an arithmetic result to dt: f32 by conversion, ints by wrapping the (integer)
// value at the dtype's width, everything else through numerics.Round.
func roundTo(dt numerics.DType, x float64) float64 {
	switch dt {
	case numerics.F64:
		return x
	case numerics.F32:
		return float64(float32(x))
	case numerics.I8, numerics.I32:
		return float64(numerics.WrapInt(dt, toInt(x)))
	}
	return numerics.Round(dt, x)
}

// roundAll applies roundTo to every element, with the common dtypes hoisted out of the loop.
func roundAll(dt numerics.DType, v []float64) {
	switch dt {
	case numerics.F64:
	case numerics.F32:
		for i, x := range v {
			v[i] = float64(float32(x))
		}
	default:
		for i, x := range v {
			v[i] = roundTo(dt, x)
		}
	}
}

// toInt converts a register value to int64 for integer arithmetic. Int registers hold exact
// integers; anything else truncates, NaN gives 0 and huge values clamp, so no conversion is
// left to Go's unspecified out-of-range behaviour.
func toInt(x float64) int64 {
	const lim = 1 << 62
	switch {
	case x != x:
		return 0
	case x >= lim:
		return lim
	case x <= -lim:
		return -lim
	}
	return int64(x)
}

func (w *worker) full(in tile.Full) {
	out := w.regs[in.Dst].out64()
	for i := range out {
		out[i] = in.Value
	}
}

func (w *worker) round(in tile.Round) {
	src := w.regs[in.Src].get64()
	out := w.regs[in.Dst].out64()
	if in.Wrap && in.DType.IsInt() {
		for i, x := range src {
			out[i] = float64(numerics.WrapInt(in.DType, toInt(x)))
		}
		return
	}
	for i, x := range src {
		out[i] = numerics.Round(in.DType, x)
	}
}

func (w *worker) unary(in tile.Unary) {
	src := w.regs[in.Src].get64()
	out := w.regs[in.Dst].out64()
	if in.DType.IsInt() && (in.Op == tile.Neg || in.Op == tile.Abs || in.Op == tile.Relu) {
		for i, x := range src {
			v := toInt(x)
			switch {
			case in.Op == tile.Neg, in.Op == tile.Abs && v < 0:
				v = -v
			case in.Op == tile.Relu && v < 0:
				v = 0
			}
			out[i] = float64(numerics.WrapInt(in.DType, v))
		}
		return
	}
	f := unaryFuncs[in.Op]
	for i, x := range src {
		out[i] = f(x)
	}
	roundAll(in.DType, out)
}

// sqrt2OverPi is √(2/π) for the tanh form of GELU.
var sqrt2OverPi = math.Sqrt(2 / math.Pi)

// unaryFuncs compute in float64; the caller rounds to the instruction dtype.
var unaryFuncs = map[tile.UnaryOp]func(float64) float64{
	tile.Neg: func(x float64) float64 { return -x },
	tile.Abs: math.Abs,
	tile.Relu: func(x float64) float64 {
		if x > 0 || x != x {
			return x
		}
		return 0
	},
	tile.Exp:     numerics.Exp,
	tile.Log:     numerics.Log,
	tile.Sqrt:    math.Sqrt,
	tile.Rsqrt:   func(x float64) float64 { return 1 / math.Sqrt(x) },
	tile.Tanh:    math.Tanh,
	tile.Sigmoid: sigmoid,
	tile.Silu:    func(x float64) float64 { return x * sigmoid(x) },
	tile.GeluErf: func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) },
	tile.GeluTanh: func(x float64) float64 {
		inner := sqrt2OverPi * (x + float64(0.044715*x*x*x))
		return 0.5 * x * (1 + math.Tanh(inner))
	},
	tile.Recip: func(x float64) float64 { return 1 / x },
	tile.Sign: func(x float64) float64 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		case x == 0:
			return 0
		}
		return x
	},
	tile.Erf: math.Erf,
}

// sigmoid never evaluates exp of a large positive argument, so it does not overflow to NaN.
func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// bcast describes how an operand of shape [r, c] is indexed in a broadcast result: element
// (i, j) of the result reads operand element i*rs + j*cs.
func bcast(t *treg) (rs, cs int) {
	if t.rows > 1 {
		rs = t.cols
	}
	if t.cols > 1 {
		cs = 1
	}
	return rs, cs
}

func (w *worker) binary(in tile.Binary) {
	ta, tb, td := &w.regs[in.A], &w.regs[in.B], &w.regs[in.Dst]
	a, b := ta.get64(), tb.get64()
	ars, acs := bcast(ta)
	brs, bcs := bcast(tb)
	// The result register may be A or B; shapes are static, so an aliased operand has the
	// result's shape and each element is read before the same element is written.
	out := td.out64()
	cols := td.cols
	isInt := in.DType.IsInt()
	for r := range td.rows {
		o := out[r*cols : (r+1)*cols]
		ar, br := a[r*ars:], b[r*brs:]
		if isInt {
			binaryIntRow(in.Op, in.DType, o, ar, acs, br, bcs)
		} else {
			binaryRow(in.Op, in.DType, o, ar, acs, br, bcs)
		}
	}
	if !isInt {
		roundAll(in.DType, out)
	}
}

// binaryRow computes one result row in float64; a step of 0 repeats the operand's element.
// The rounding divisions compute their quotient in dt's precision (f64, else f32).
func binaryRow(op tile.BinaryOp, dt numerics.DType, o, a []float64, as int, b []float64, bs int) {
	switch op {
	case tile.DivTrunc:
		for j := range o {
			o[j] = truncDiv(a[j*as], b[j*bs], dt)
		}
	case tile.DivFloor:
		for j := range o {
			o[j] = floorDiv(a[j*as], b[j*bs], dt == numerics.F64)
		}
	case tile.Add:
		for j := range o {
			o[j] = a[j*as] + b[j*bs]
		}
	case tile.Sub:
		for j := range o {
			o[j] = a[j*as] - b[j*bs]
		}
	case tile.Mul:
		for j := range o {
			o[j] = a[j*as] * b[j*bs]
		}
	case tile.Div:
		for j := range o {
			o[j] = a[j*as] / b[j*bs]
		}
	case tile.Max:
		// The builtins propagate NaN and order -0 below +0, as the IR requires.
		for j := range o {
			o[j] = max(a[j*as], b[j*bs])
		}
	case tile.Min:
		for j := range o {
			o[j] = min(a[j*as], b[j*bs])
		}
	}
}

// binaryIntRow computes one row exactly in int64 and wraps at dt's width. Integer division
// truncates toward zero; dividing by zero gives 0 (the graph has no integer div; the IR
// must still give a defined answer).
func binaryIntRow(op tile.BinaryOp, dt numerics.DType, o, a []float64, as int, b []float64, bs int) {
	for j := range o {
		x, y := toInt(a[j*as]), toInt(b[j*bs])
		var v int64
		switch op {
		case tile.Add:
			v = x + y
		case tile.Sub:
			v = x - y
		case tile.Mul:
			v = x * y
		case tile.Div, tile.DivTrunc:
			if y != 0 {
				v = x / y
			}
		case tile.DivFloor:
			if y != 0 {
				v = x / y
				if r := x % y; r != 0 && (r < 0) != (y < 0) && !failpoint.Enabled(failpoint.CPUDivFloorTruncates) {
					v--
				}
			}
		case tile.Max:
			v = max(x, y)
		case tile.Min:
			v = min(x, y)
		}
		o[j] = float64(numerics.WrapInt(dt, v))
	}
}

func (w *worker) maskScores(in tile.MaskScores) {
	src := w.regs[in.Src].get64()
	td := &w.regs[in.Dst]
	out := td.out64()
	rs, cs := in.RowStart.Eval(w.vars), in.ColStart.Eval(w.vars)
	ninf := math.Inf(-1)
	for r := range td.rows {
		i := rs + r
		for c := range td.cols {
			j, k := cs+c, r*td.cols+c
			future := j > i // key after query
			if in.KeysOnRows {
				future = i > j
			}
			if j >= in.ColLimit || (in.Causal && future) {
				out[k] = ninf
			} else {
				out[k] = src[k]
			}
		}
	}
}

func (w *worker) maskCols(in tile.MaskCols) {
	src := w.regs[in.Src].get64()
	td := &w.regs[in.Dst]
	out := td.out64()
	cs := in.ColStart.Eval(w.vars)
	for r := range td.rows {
		for c := range td.cols {
			k := r*td.cols + c
			if cs+c >= in.ColLimit {
				out[k] = in.Value
			} else {
				out[k] = src[k]
			}
		}
	}
}
