package ref

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

const (
	f64 = numerics.F64
	f32 = numerics.F32
	e4  = numerics.F8E4M3
	f16 = numerics.F16
	i8  = numerics.I8
	i32 = numerics.I32
)

// opCase is one hand-computed example: the expected numbers are written out, not computed.
type opCase struct {
	name  string
	op    string
	attrs graph.Attrs
	in    []*tensor.Tensor
	dt    numerics.DType // output dtype
	shape []int
	want  []float64
	tol   float64 // 0: exact, sign of zero included
}

func ins(ts ...*tensor.Tensor) []*tensor.Tensor { return ts }

var unaryCases = []opCase{
	{"neg/f32", "neg", nil, ins(tt(f32, sh(4), 1, -2, 0, nan)), f32, sh(4), []float64{-1, 2, negz, nan}, 0},
	{"neg/int8_min_wraps", "neg", nil, ins(tt(i8, sh(3), -128, 5, 127)), i8, sh(3), []float64{-128, -5, -127}, 0},
	{"abs/f32", "abs", nil, ins(tt(f32, sh(4), -1.5, 2, negz, -inf)), f32, sh(4), []float64{1.5, 2, 0, inf}, 0},
	{"abs/int8_min_wraps", "abs", nil, ins(tt(i8, sh(3), -128, -3, 5)), i8, sh(3), []float64{-128, 3, 5}, 0},
	{"relu/f32", "relu", nil, ins(tt(f32, sh(5), -1, negz, 2, nan, -inf)), f32, sh(5), []float64{0, 0, 2, nan, 0}, 0},
	{"relu/int32", "relu", nil, ins(tt(i32, sh(2), -5, 7)), i32, sh(2), []float64{0, 7}, 0},
	{"exp", "exp", nil, ins(tt(f64, sh(4), 0, 1, ln2, -inf)), f64, sh(4), []float64{1, math.E, 2, 0}, 1e-15},
	{"log", "log", nil, ins(tt(f64, sh(5), 1, math.E, 0, -1, inf)), f64, sh(5), []float64{0, 1, -inf, nan, inf}, 1e-15},
	{"sqrt", "sqrt", nil, ins(tt(f64, sh(4), 4, 2.25, 0, -1)), f64, sh(4), []float64{2, 1.5, 0, nan}, 0},
	{"rsqrt", "rsqrt", nil, ins(tt(f64, sh(4), 4, 0.25, 0, inf)), f64, sh(4), []float64{0.5, 2, inf, 0}, 0},
	// tanh(ln3/2) = (3-1)/(3+1).
	{"tanh", "tanh", nil, ins(tt(f64, sh(4), 0, ln3/2, -ln3/2, inf)), f64, sh(4), []float64{0, 0.5, -0.5, 1}, 1e-15},
	// sigmoid(ln3) = 1/(1+1/3); +-1000 would overflow a naive e^|x| form into NaN.
	{"sigmoid", "sigmoid", nil, ins(tt(f64, sh(5), 0, ln3, -ln3, 1000, -1000)), f64, sh(5), []float64{0.5, 0.75, 0.25, 1, 0}, 1e-15},
	{"silu", "silu", nil, ins(tt(f64, sh(3), 0, ln3, -ln3)), f64, sh(3), []float64{0, 0.75 * ln3, -0.25 * ln3}, 1e-15},
	// Phi(1) = 0.8413447460685429 (normal CDF table value).
	{"gelu/erf", "gelu", nil, ins(tt(f64, sh(3), 0, 1, -1)), f64, sh(3), []float64{0, 0.8413447460685429, -(1 - 0.8413447460685429)}, 1e-15},
	// 0.5(1+tanh(0.7978845608*1.044715)) = 0.8411919906; tanh is odd, so gelu(-1) = -(1-0.84119...).
	{"gelu/tanh", "gelu", graph.Attrs{"approx": graph.String("tanh")}, ins(tt(f64, sh(3), 0, 1, -1)), f64, sh(3),
		[]float64{0, 0.8411919906, -0.1588080094}, 1e-10},
	// full_like rounds value as cast does, whatever x holds: 1+2^-8 lies halfway between bf16's
	// 1 and 1+2^-7 (tie to even: 1), 1+3*2^-8 halfway between 1+2^-7 and 1+2^-6 (even: 1+2^-6);
	// e4m3 saturates at 448, f16 overflows to +Inf; ints truncate toward zero and saturate.
	{"full_like/bf16_tie_down", "full_like", graph.Attrs{"value": graph.Float(1 + 1.0/256)}, ins(tt(numerics.BF16, sh(2), 7, nan)),
		numerics.BF16, sh(2), []float64{1, 1}, 0},
	{"full_like/bf16_tie_up", "full_like", graph.Attrs{"value": graph.Float(1 + 3.0/256)}, ins(tt(numerics.BF16, sh(1), -7)),
		numerics.BF16, sh(1), []float64{1.015625}, 0},
	{"full_like/fp8e4m3_saturates", "full_like", graph.Attrs{"value": graph.Float(-1000)}, ins(tt(numerics.F8E4M3, sh(1), 1)),
		numerics.F8E4M3, sh(1), []float64{-448}, 0},
	{"full_like/f16_overflows", "full_like", graph.Attrs{"value": graph.Float(1e5)}, ins(tt(f16, sh(1), 1)), f16, sh(1), []float64{inf}, 0},
	{"full_like/f32_nan", "full_like", graph.Attrs{"value": graph.Float(nan)}, ins(tt(f32, sh(2), 1, 2)), f32, sh(2), []float64{nan, nan}, 0},
	{"full_like/f32_negzero", "full_like", graph.Attrs{"value": graph.Float(negz)}, ins(tt(f32, sh(1), 1)), f32, sh(1), []float64{negz}, 0},
	{"full_like/int8_saturates", "full_like", graph.Attrs{"value": graph.Float(300)}, ins(tt(i8, sh(1), 3)), i8, sh(1), []float64{127}, 0},
	{"full_like/int8_saturates_low", "full_like", graph.Attrs{"value": graph.Float(-300.7)}, ins(tt(i8, sh(1), 3)), i8, sh(1), []float64{-128}, 0},
	{"full_like/int32_truncates", "full_like", graph.Attrs{"value": graph.Float(-3.7)}, ins(tt(i32, sh(3), 1, 2, 3)), i32, sh(3), []float64{-3, -3, -3}, 0},
	// sign: both zeros give +0, NaN stays NaN, infinities and the smallest subnormal count.
	{"sign/f32", "sign", nil, ins(tt(f32, sh(8), -2, negz, 0, 3, nan, -inf, inf, math.SmallestNonzeroFloat32)), f32, sh(8),
		[]float64{-1, 0, 0, 1, nan, -1, 1, 1}, 0},
	{"sign/f16", "sign", nil, ins(tt(f16, sh(3), -0.5, negz, 65504)), f16, sh(3), []float64{-1, 0, 1}, 0},
	{"sign/int8", "sign", nil, ins(tt(i8, sh(4), -128, 0, 5, 127)), i8, sh(4), []float64{-1, 0, 1, 1}, 0},
	{"sign/int32", "sign", nil, ins(tt(i32, sh(3), math.MinInt32, -7, math.MaxInt32)), i32, sh(3), []float64{-1, -1, 1}, 0},
	// erf(0.5), erf(1), erf(2) from tables (Abramowitz & Stegun 7.1); erf is odd (erf(-0) = -0)
	// and tends to ±1.
	{"erf", "erf", nil, ins(tt(f64, sh(8), 0, negz, 1, -0.5, 2, inf, -inf, nan)), f64, sh(8),
		[]float64{0, negz, 0.8427007929497149, -0.5204998778130465, 0.9953222650189527, 1, -1, nan}, 1e-15},
	// Rounded to f32 once: erf(1) = 0.84270079... -> 0x3F57BB3D = 0.842700779438018798828125.
	{"erf/f32", "erf", nil, ins(tt(f32, sh(1), 1)), f32, sh(1), []float64{0.842700779438018798828125}, 0},
}

var binaryCases = []opCase{
	{"add/same_shape", "add", nil, ins(tt(f32, sh(2), 1, 2), tt(f32, sh(2), 10, 20)), f32, sh(2), []float64{11, 22}, 0},
	{"add/row_broadcast", "add", nil, ins(tt(f32, sh(2, 3), 1, 2, 3, 4, 5, 6), tt(f32, sh(3), 10, 20, 30)), f32, sh(2, 3),
		[]float64{11, 22, 33, 14, 25, 36}, 0},
	{"add/outer", "add", nil, ins(tt(f32, sh(2, 1), 1, 2), tt(f32, sh(1, 3), 10, 20, 30)), f32, sh(2, 3),
		[]float64{11, 21, 31, 12, 22, 32}, 0},
	{"add/scalar_left", "add", nil, ins(tt(f32, nil, 5), tt(f32, sh(2), 1, 2)), f32, sh(2), []float64{6, 7}, 0},
	{"sub/rank3_middle", "sub", nil, ins(tt(f64, sh(2, 1, 2), 1, 2, 3, 4), tt(f64, sh(3, 1), 10, 20, 30)), f64, sh(2, 3, 2),
		[]float64{-9, -8, -19, -18, -29, -28, -7, -6, -17, -16, -27, -26}, 0},
	{"add/nan", "add", nil, ins(tt(f32, sh(3), nan, 1, inf), tt(f32, sh(3), 1, nan, -inf)), f32, sh(3), []float64{nan, nan, nan}, 0},
	{"add/int8_wraps", "add", nil, ins(tt(i8, sh(2), 100, -100), tt(i8, sh(2), 100, -100)), i8, sh(2), []float64{-56, 56}, 0},
	{"add/int32_wraps", "add", nil, ins(tt(i32, sh(1), 2147483647), tt(i32, sh(1), 1)), i32, sh(1), []float64{-2147483648}, 0},
	{"sub/int8_wraps", "sub", nil, ins(tt(i8, sh(1), -128), tt(i8, sh(1), 1)), i8, sh(1), []float64{127}, 0},
	{"mul/f32", "mul", nil, ins(tt(f32, sh(3), 1.5, -2, 0), tt(f32, sh(3), 4, 3, -1)), f32, sh(3), []float64{6, -6, negz}, 0},
	{"mul/int8_wraps", "mul", nil, ins(tt(i8, sh(2), 16, 100), tt(i8, sh(2), 16, 3)), i8, sh(2), []float64{0, 44}, 0},
	{"div/ieee", "div", nil, ins(tt(f32, sh(4), 1, -1, 0, 3), tt(f32, sh(4), 0, 0, 0, -4)), f32, sh(4), []float64{inf, -inf, nan, -0.75}, 0},
	{"maximum/nan_and_zeros", "maximum", nil, ins(tt(f32, sh(5), negz, nan, 1, inf, 3), tt(f32, sh(5), 0, 1, nan, nan, 2)), f32, sh(5),
		[]float64{0, nan, nan, nan, 3}, 0},
	{"maximum/zeros_swapped", "maximum", nil, ins(tt(f32, sh(1), 0), tt(f32, sh(1), negz)), f32, sh(1), []float64{0}, 0},
	{"minimum/nan_and_zeros", "minimum", nil, ins(tt(f32, sh(5), 0, nan, 1, -inf, 3), tt(f32, sh(5), negz, 1, nan, nan, 2)), f32, sh(5),
		[]float64{negz, nan, nan, nan, 2}, 0},
	{"minimum/int8_broadcast", "minimum", nil, ins(tt(i8, sh(3), -5, 0, 9), tt(i8, nil, 1)), i8, sh(3), []float64{-5, 0, 1}, 0},
	{"maximum/int32", "maximum", nil, ins(tt(i32, sh(2), -5, 9), tt(i32, sh(2), -7, 10)), i32, sh(2), []float64{-5, 10}, 0},
}

var castCases = []opCase{
	{"f32_to_int8", "cast", graph.Attrs{"to": graph.DTypeAttr(i8)}, ins(tt(f32, sh(6), 1.5, -2.7, nan, 1e10, -1e10, -0.5)), i8, sh(6),
		[]float64{1, -2, 0, 127, -128, 0}, 0},
	{"f64_to_int32_saturates", "cast", graph.Attrs{"to": graph.DTypeAttr(i32)}, ins(tt(f64, sh(3), 1e10, -inf, 2147483647.9)), i32, sh(3),
		[]float64{2147483647, -2147483648, 2147483647}, 0},
	{"f32_to_bool", "cast", graph.Attrs{"to": graph.DTypeAttr(numerics.Bool)}, ins(tt(f32, sh(4), 0, negz, 2, nan)), numerics.Bool, sh(4),
		[]float64{0, 0, 1, 1}, 0},
	{"bool_to_f32", "cast", graph.Attrs{"to": graph.DTypeAttr(f32)}, ins(tt(numerics.Bool, sh(2), 1, 0)), f32, sh(2), []float64{1, 0}, 0},
	{"int32_to_int8_wraps", "cast", graph.Attrs{"to": graph.DTypeAttr(i8)}, ins(tt(i32, sh(3), 300, -129, -7)), i8, sh(3),
		[]float64{44, 127, -7}, 0},
	{"int8_to_bool", "cast", graph.Attrs{"to": graph.DTypeAttr(numerics.Bool)}, ins(tt(i8, sh(3), 0, -1, 2)), numerics.Bool, sh(3),
		[]float64{0, 1, 1}, 0},
	{"int32_to_f32_rne", "cast", graph.Attrs{"to": graph.DTypeAttr(f32)}, ins(tt(i32, sh(2), 16777217, 16777219)), f32, sh(2),
		[]float64{16777216, 16777220}, 0},
	{"f64_to_e4m3_saturates", "cast", graph.Attrs{"to": graph.DTypeAttr(numerics.F8E4M3)}, ins(tt(f64, sh(4), 1000, inf, -inf, 1.0625)),
		numerics.F8E4M3, sh(4), []float64{448, 448, -448, 1}, 0},
	// 1+2^-11 is the f16 midpoint between 1 and 1+2^-10: ties go to the even mantissa.
	{"f64_to_f16_ties_even", "cast", graph.Attrs{"to": graph.DTypeAttr(f16)}, ins(tt(f64, sh(2), 1+1.0/2048, 1+3.0/2048)), f16, sh(2),
		[]float64{1, 1 + 2.0/1024}, 0},
	{"f32_to_f64_exact", "cast", graph.Attrs{"to": graph.DTypeAttr(f64)}, ins(tt(f32, sh(2), 0.1, negz)), f64, sh(2),
		[]float64{float64(float32(0.1)), negz}, 0},
}

var reduceCases = []opCase{
	{"sum/last_axis", "reduce_sum", graph.Attrs{"axes": graph.Ints(1)}, ins(tt(f32, sh(2, 3), 1, 2, 3, 4, 5, 6)), f32, sh(2), []float64{6, 15}, 0},
	{"sum/negative_axis", "reduce_sum", graph.Attrs{"axes": graph.Ints(-1)}, ins(tt(f32, sh(2, 3), 1, 2, 3, 4, 5, 6)), f32, sh(2), []float64{6, 15}, 0},
	{"sum/first_axis_keepdims", "reduce_sum", graph.Attrs{"axes": graph.Ints(0), "keepdims": graph.Bool(true)},
		ins(tt(f32, sh(2, 3), 1, 2, 3, 4, 5, 6)), f32, sh(1, 3), []float64{5, 7, 9}, 0},
	{"sum/all", "reduce_sum", nil, ins(tt(f32, sh(2, 3), 1, 2, 3, 4, 5, 6)), f32, nil, []float64{21}, 0},
	{"sum/outer_axes_of_3d", "reduce_sum", graph.Attrs{"axes": graph.Ints(0, 2)}, ins(tt(f64, sh(2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8)), f64, sh(2),
		[]float64{1 + 2 + 5 + 6, 3 + 4 + 7 + 8}, 0},
	{"sum/nan", "reduce_sum", graph.Attrs{"axes": graph.Ints(1)}, ins(tt(f32, sh(2, 2), 1, nan, 2, 3)), f32, sh(2), []float64{nan, 5}, 0},
	{"sum/int8_wraps", "reduce_sum", nil, ins(tt(i8, sh(3), 127, 1, 0)), i8, nil, []float64{-128}, 0},
	{"sum/int8_wraps_back", "reduce_sum", nil, ins(tt(i8, sh(3), 100, 100, -100)), i8, nil, []float64{100}, 0},
	{"max/nan_row", "reduce_max", graph.Attrs{"axes": graph.Ints(1)}, ins(tt(f32, sh(2, 2), 1, nan, 3, 2)), f32, sh(2), []float64{nan, 3}, 0},
	{"max/nan_last", "reduce_max", nil, ins(tt(f32, sh(3), 5, 1, nan)), f32, nil, []float64{nan}, 0},
	{"max/int32", "reduce_max", graph.Attrs{"axes": graph.Ints(0)}, ins(tt(i32, sh(2, 2), -5, 3, -7, 9)), i32, sh(2), []float64{-5, 9}, 0},
	{"mean/first_axis", "reduce_mean", graph.Attrs{"axes": graph.Ints(0)}, ins(tt(f32, sh(2, 3), 1, 2, 3, 4, 5, 6)), f32, sh(3),
		[]float64{2.5, 3.5, 4.5}, 0},
	{"mean/all_keepdims", "reduce_mean", graph.Attrs{"keepdims": graph.Bool(true)}, ins(tt(f32, sh(2, 2), 1, 2, 3, 6)), f32, sh(1, 1),
		[]float64{3}, 0},
}

var rowCases = []opCase{
	{"softmax/ln2", "softmax", nil, ins(tt(f64, sh(2), 0, ln2)), f64, sh(2), []float64{1.0 / 3, 2.0 / 3}, 1e-15},
	{"softmax/shift_invariant_large", "softmax", nil, ins(tt(f64, sh(2), 1000, 1000+ln2)), f64, sh(2), []float64{1.0 / 3, 2.0 / 3}, 1e-12},
	{"softmax/axis0", "softmax", graph.Attrs{"axis": graph.Int(0)}, ins(tt(f64, sh(2, 2), 0, 0, ln2, ln3)), f64, sh(2, 2),
		[]float64{1.0 / 3, 1.0 / 4, 2.0 / 3, 3.0 / 4}, 1e-15},
	{"softmax/all_neg_inf_row", "softmax", nil, ins(tt(f32, sh(2, 2), -inf, -inf, 0, 0)), f32, sh(2, 2), []float64{nan, nan, 0.5, 0.5}, 0},
	{"softmax/pos_inf", "softmax", nil, ins(tt(f32, sh(2), 0, inf)), f32, sh(2), []float64{nan, nan}, 0},
	{"softmax/neg_inf_entry", "softmax", nil, ins(tt(f32, sh(3), -inf, 0, 0)), f32, sh(3), []float64{0, 0.5, 0.5}, 0},
	{"log_softmax/ln2", "log_softmax", nil, ins(tt(f64, sh(2), 0, ln2)), f64, sh(2), []float64{-ln3, ln2 - ln3}, 1e-15},
	{"log_softmax/all_neg_inf", "log_softmax", nil, ins(tt(f64, sh(2), -inf, -inf)), f64, sh(2), []float64{nan, nan}, 0},
	// Rows [1,3] and [2,6]: mean 2 / 4, biased variance 1 / 4, so both normalize to [-1, 1].
	{"layernorm/two_rows", "layernorm", graph.Attrs{"eps": graph.Float(0)},
		ins(tt(f32, sh(2, 2), 1, 3, 2, 6), tt(f32, sh(2), 2, 3), tt(f32, sh(2), 0.5, -0.5)), f32, sh(2, 2),
		[]float64{-1.5, 2.5, -1.5, 2.5}, 0},
	{"layernorm/eps", "layernorm", graph.Attrs{"eps": graph.Float(3)},
		ins(tt(f64, sh(2), 1, 3), tt(f64, sh(2), 1, 1), tt(f64, sh(2), 0, 0)), f64, sh(2), []float64{-0.5, 0.5}, 0},
	{"layernorm/four", "layernorm", graph.Attrs{"eps": graph.Float(0)},
		ins(tt(f64, sh(4), 1, 2, 3, 4), tt(f64, sh(4), 1, 1, 1, 1), tt(f64, sh(4), 0, 0, 0, 0)), f64, sh(4),
		[]float64{-1.5 / math.Sqrt(1.25), -0.5 / math.Sqrt(1.25), 0.5 / math.Sqrt(1.25), 1.5 / math.Sqrt(1.25)}, 1e-15},
	// [1,7]: mean of squares 25, rms 5.
	{"rmsnorm/basic", "rmsnorm", graph.Attrs{"eps": graph.Float(0)}, ins(tt(f64, sh(2), 1, 7), tt(f64, sh(2), 1, 2)), f64, sh(2),
		[]float64{0.2, 2.8}, 1e-15},
	{"rmsnorm/eps", "rmsnorm", graph.Attrs{"eps": graph.Float(7)}, ins(tt(f64, sh(2, 2), 3, -3, 1, 1), tt(f64, sh(2), 1, 1)), f64, sh(2, 2),
		[]float64{0.75, -0.75, 1 / math.Sqrt(8), 1 / math.Sqrt(8)}, 1e-15},
	{"mse_loss", "mse_loss", nil, ins(tt(f32, sh(3), 1, 2, 3), tt(f32, sh(3), 1, 0, 0)), f32, nil, []float64{13.0 / 3}, 1e-7},
	{"mse_loss/2d", "mse_loss", nil, ins(tt(f64, sh(2, 2), 1, 2, 3, 4), tt(f64, sh(2, 2), 0, 0, 0, 0)), f64, nil, []float64{7.5}, 0},
}

var matmulCases = []opCase{
	{"matmul/2x2", "matmul", nil, ins(tt(f32, sh(2, 2), 1, 2, 3, 4), tt(f32, sh(2, 2), 5, 6, 7, 8)), f32, sh(2, 2),
		[]float64{19, 22, 43, 50}, 0},
	{"matmul/2x3x1", "matmul", nil, ins(tt(f64, sh(2, 3), 1, 2, 3, 4, 5, 6), tt(f64, sh(3, 1), 1, 0, -1)), f64, sh(2, 1),
		[]float64{-2, -2}, 0},
	{"matmul/transpose_a", "matmul", graph.Attrs{"transpose_a": graph.Bool(true)},
		ins(tt(f32, sh(2, 2), 1, 3, 2, 4), tt(f32, sh(2, 2), 5, 6, 7, 8)), f32, sh(2, 2), []float64{19, 22, 43, 50}, 0},
	{"matmul/int8_wraps", "matmul", nil, ins(tt(i8, sh(1, 2), 100, 100), tt(i8, sh(2, 1), 1, 1)), i8, sh(1, 1), []float64{-56}, 0},
	{"matmul/nan_row", "matmul", nil, ins(tt(f32, sh(2, 2), nan, 1, 1, 1), tt(f32, sh(2, 2), 1, 2, 3, 4)), f32, sh(2, 2),
		[]float64{nan, nan, 4, 6}, 0},
	{"batch_matmul", "batch_matmul", nil,
		ins(tt(f32, sh(2, 1, 2), 1, 2, 3, 4), tt(f32, sh(2, 2, 1), 5, 6, 7, 8)), f32, sh(2, 1, 1), []float64{17, 53}, 0},
	{"batch_matmul/int32", "batch_matmul", graph.Attrs{"transpose_b": graph.Bool(true)},
		ins(tt(i32, sh(1, 1, 2), 2, 3), tt(i32, sh(1, 2, 2), 1, 1, -1, 2)), i32, sh(1, 1, 2), []float64{5, 4}, 0},
	// scaled_matmul: b is [N,K]; (a b^T) * 0.5 * 4.
	{"scaled_matmul/f32", "scaled_matmul", graph.Attrs{"out_dtype": graph.DTypeAttr(f32)},
		ins(tt(e4, sh(2, 2), 1, 2, 3, 4), tt(e4, sh(2, 2), 5, 7, 6, 8), tt(f32, nil, 0.5), tt(f32, sh(1), 4)), f32, sh(2, 2),
		[]float64{38, 44, 86, 100}, 0},
	// e4m3's largest finite value squared and summed (2 * 448^2 = 401408, exact in bf16), and a
	// NaN (0x7F) that reaches only its own output column.
	{"scaled_matmul/max_nan_bf16", "scaled_matmul", nil,
		ins(tt(e4, sh(1, 2), 448, 448), tt(e4, sh(2, 2), 448, 448, nan, 1), tt(f32, nil, 1), tt(f32, nil, 1)), numerics.BF16, sh(1, 2),
		[]float64{401408, nan}, 0},
	// The smallest subnormal, 2^-9, squared is 2^-18: the scales bring it back to 1.
	{"scaled_matmul/subnormal", "scaled_matmul", graph.Attrs{"out_dtype": graph.DTypeAttr(f32)},
		ins(tt(e4, sh(1, 1), 0x1p-9), tt(e4, sh(1, 1), 0x1p-9), tt(f32, nil, 0x1p9), tt(f32, nil, 0x1p9)), f32, sh(1, 1),
		[]float64{1}, 0},
	// D=1, scale 1: scores [0, ln2] give weights [1/3, 2/3] on v = [3, 6].
	{"attention/weights", "attention", nil, ins(tt(f64, sh(1, 1), 1), tt(f64, sh(2, 1), 0, ln2), tt(f64, sh(2, 1), 3, 6)), f64, sh(1, 1),
		[]float64{5}, 1e-14},
	// D=4: the default scale 1/sqrt(4) halves the dot product 2ln2.
	{"attention/default_scale", "attention", nil,
		ins(tt(f64, sh(1, 4), 1, 0, 0, 0), tt(f64, sh(2, 4), 0, 0, 0, 0, 2*ln2, 5, 5, 5), tt(f64, sh(2, 1), 3, 6)), f64, sh(1, 1),
		[]float64{5}, 1e-14},
	{"attention/scale_attr", "attention", graph.Attrs{"scale": graph.Float(0.5)},
		ins(tt(f64, sh(1, 1), 2), tt(f64, sh(2, 1), 0, ln2), tt(f64, sh(2, 1), 3, 6)), f64, sh(1, 1), []float64{5}, 1e-14},
	// Equal scores: row 0 sees only key 0, row 1 averages both keys.
	{"attention/causal", "attention", graph.Attrs{"causal": graph.Bool(true)},
		ins(tt(f32, sh(2, 1), 1, 1), tt(f32, sh(2, 1), 0, 0), tt(f32, sh(2, 2), 3, -1, 6, 1)), f32, sh(2, 2), []float64{3, -1, 4.5, 0}, 0},
	// attention_lse, D=1, scale 1: scores [0, ln2] give lse = log(1+2) = ln3.
	{"attention_lse", "attention_lse", graph.Attrs{"scale": graph.Float(1)}, ins(tt(f64, sh(1, 1), 1), tt(f64, sh(2, 1), 0, ln2)), f64, sh(1),
		[]float64{ln3}, 1e-15},
	// D=4: the default scale 1/sqrt(4) halves the dot products 0 and 2ln2.
	{"attention_lse/default_scale", "attention_lse", nil,
		ins(tt(f64, sh(1, 4), 1, 0, 0, 0), tt(f64, sh(2, 4), 0, 0, 0, 0, 2*ln2, 5, 5, 5)), f64, sh(1), []float64{ln3}, 1e-15},
	// Causal, two batches: query 0 sees key 0 alone (lse = its score: 0, then 2*1), query 1 both
	// (scores [0, ln2] -> ln3, then q = 0: [0, 0] -> ln2).
	{"attention_lse/causal_batched", "attention_lse", graph.Attrs{"causal": graph.Bool(true), "scale": graph.Float(1)},
		ins(tt(f64, sh(2, 2, 1), 1, 1, 2, 0), tt(f64, sh(2, 2, 1), 0, ln2, 1, ln2)), f64, sh(2, 2), []float64{0, ln3, 2, ln2}, 1e-15},
	// A query of -Inf scores -Inf against positive keys: log(0) = -Inf (as torch.logsumexp), not
	// the NaN of exp(-Inf - -Inf); the other row is log(e^1 + e^2) = 2 + log(1 + 1/e).
	{"attention_lse/all_minus_inf", "attention_lse", graph.Attrs{"scale": graph.Float(1)},
		ins(tt(f64, sh(2, 1), -inf, 1), tt(f64, sh(2, 1), 1, 2)), f64, sh(2), []float64{-inf, 2.3132616875182228}, 1e-15},
	// bf16 q, k: lse is f32. Scores [0, 1]: log(1+e) = 1.3132616875182228, rounded to f32.
	{"attention_lse/bf16_gives_f32", "attention_lse", graph.Attrs{"scale": graph.Float(1)},
		ins(tt(numerics.BF16, sh(1, 1), 1), tt(numerics.BF16, sh(2, 1), 0, 1)), f32, sh(1), []float64{1.3132616875182228}, 1e-7},
	// attention_grad. One query, D=1, scale 1, k = [0, ln2], v = [3, 6], do = 1: P = [1/3, 2/3],
	// o = 5, lse = ln3; dV = P^T dO = [1/3, 2/3]; dP = dO V^T = [3, 6], D = dO.o = 5,
	// dS = P(dP - D) = [-2/3, 2/3]; dQ = scale dS K = 2/3 ln2; dK = scale dS^T Q = [-2/3, 2/3].
	{"attention_grad/v", "attention_grad", graph.Attrs{"scale": graph.Float(1), "wrt": graph.String("v")},
		ins(tt(f64, sh(1, 1), 1), tt(f64, sh(2, 1), 0, ln2), tt(f64, sh(2, 1), 3, 6), tt(f64, sh(1, 1), 5), tt(f64, sh(1, 1), 1), tt(f64, sh(1), ln3)),
		f64, sh(2, 1), []float64{1.0 / 3, 2.0 / 3}, 1e-15},
	{"attention_grad/q", "attention_grad", graph.Attrs{"scale": graph.Float(1), "wrt": graph.String("q")},
		ins(tt(f64, sh(1, 1), 1), tt(f64, sh(2, 1), 0, ln2), tt(f64, sh(2, 1), 3, 6), tt(f64, sh(1, 1), 5), tt(f64, sh(1, 1), 1), tt(f64, sh(1), ln3)),
		f64, sh(1, 1), []float64{2.0 / 3 * ln2}, 1e-15},
	{"attention_grad/k", "attention_grad", graph.Attrs{"scale": graph.Float(1), "wrt": graph.String("k")},
		ins(tt(f64, sh(1, 1), 1), tt(f64, sh(2, 1), 0, ln2), tt(f64, sh(2, 1), 3, 6), tt(f64, sh(1, 1), 5), tt(f64, sh(1, 1), 1), tt(f64, sh(1), ln3)),
		f64, sh(2, 1), []float64{-2.0 / 3, 2.0 / 3}, 1e-15},
	// Scale 2 with q = 1/2 keeps the scores [0, ln2] (same P, dS): dQ = 2 * 2/3 ln2,
	// dK = 2 * dS * 1/2 = [-2/3, 2/3].
	{"attention_grad/q_scale2", "attention_grad", graph.Attrs{"scale": graph.Float(2), "wrt": graph.String("q")},
		ins(tt(f64, sh(1, 1), 0.5), tt(f64, sh(2, 1), 0, ln2), tt(f64, sh(2, 1), 3, 6), tt(f64, sh(1, 1), 5), tt(f64, sh(1, 1), 1), tt(f64, sh(1), ln3)),
		f64, sh(1, 1), []float64{4.0 / 3 * ln2}, 1e-15},
	{"attention_grad/k_scale2", "attention_grad", graph.Attrs{"scale": graph.Float(2), "wrt": graph.String("k")},
		ins(tt(f64, sh(1, 1), 0.5), tt(f64, sh(2, 1), 0, ln2), tt(f64, sh(2, 1), 3, 6), tt(f64, sh(1, 1), 5), tt(f64, sh(1, 1), 1), tt(f64, sh(1), ln3)),
		f64, sh(2, 1), []float64{-2.0 / 3, 2.0 / 3}, 1e-15},
	// Dv = 2: v = [[3, 1], [6, 1]], do = [1, 5]: o = [5, 1], dP = [8, 11], D = 10, dS = [-2/3, 2/3]
	// as before; dV = P^T dO = [[1/3, 5/3], [2/3, 10/3]].
	{"attention_grad/v_dv2", "attention_grad", graph.Attrs{"scale": graph.Float(1), "wrt": graph.String("v")},
		ins(tt(f64, sh(1, 1), 1), tt(f64, sh(2, 1), 0, ln2), tt(f64, sh(2, 2), 3, 1, 6, 1), tt(f64, sh(1, 2), 5, 1), tt(f64, sh(1, 2), 1, 5), tt(f64, sh(1), ln3)),
		f64, sh(2, 2), []float64{1.0 / 3, 5.0 / 3, 2.0 / 3, 10.0 / 3}, 1e-15},
	{"attention_grad/q_dv2", "attention_grad", graph.Attrs{"scale": graph.Float(1), "wrt": graph.String("q")},
		ins(tt(f64, sh(1, 1), 1), tt(f64, sh(2, 1), 0, ln2), tt(f64, sh(2, 2), 3, 1, 6, 1), tt(f64, sh(1, 2), 5, 1), tt(f64, sh(1, 2), 1, 5), tt(f64, sh(1), ln3)),
		f64, sh(1, 1), []float64{2.0 / 3 * ln2}, 1e-15},
	// Causal, two queries: q = [1, 1], k = [0, ln2], v = [3, 6], do = [2, 1]. Query 0 sees key 0
	// only: P = [1, 0], o = 3, lse = 0, D = 6, dP = [6, 12], dS = [0, 0]. Query 1 is the problem
	// above with dO = 1: P = [1/3, 2/3], o = 5, lse = ln3, dS = [-2/3, 2/3].
	// dV = [1*2 + 1/3*1, 0*2 + 2/3*1] = [7/3, 2/3]; dQ = [0, 2/3 ln2]; dK = [-2/3, 2/3].
	// (Without the mask query 0 would give dV = [4/3, 2], dQ0 = 4/3 ln2.)
	{"attention_grad/causal_v", "attention_grad", graph.Attrs{"causal": graph.Bool(true), "scale": graph.Float(1), "wrt": graph.String("v")},
		ins(tt(f64, sh(2, 1), 1, 1), tt(f64, sh(2, 1), 0, ln2), tt(f64, sh(2, 1), 3, 6), tt(f64, sh(2, 1), 3, 5), tt(f64, sh(2, 1), 2, 1), tt(f64, sh(2), 0, ln3)),
		f64, sh(2, 1), []float64{7.0 / 3, 2.0 / 3}, 1e-15},
	{"attention_grad/causal_q", "attention_grad", graph.Attrs{"causal": graph.Bool(true), "scale": graph.Float(1), "wrt": graph.String("q")},
		ins(tt(f64, sh(2, 1), 1, 1), tt(f64, sh(2, 1), 0, ln2), tt(f64, sh(2, 1), 3, 6), tt(f64, sh(2, 1), 3, 5), tt(f64, sh(2, 1), 2, 1), tt(f64, sh(2), 0, ln3)),
		f64, sh(2, 1), []float64{0, 2.0 / 3 * ln2}, 1e-15},
	{"attention_grad/causal_k", "attention_grad", graph.Attrs{"causal": graph.Bool(true), "scale": graph.Float(1), "wrt": graph.String("k")},
		ins(tt(f64, sh(2, 1), 1, 1), tt(f64, sh(2, 1), 0, ln2), tt(f64, sh(2, 1), 3, 6), tt(f64, sh(2, 1), 3, 5), tt(f64, sh(2, 1), 2, 1), tt(f64, sh(2), 0, ln3)),
		f64, sh(2, 1), []float64{-2.0 / 3, 2.0 / 3}, 1e-15},
	// f32 inputs (lse f32): the one-query problem, dV rounded to f32.
	{"attention_grad/f32_v", "attention_grad", graph.Attrs{"scale": graph.Float(1), "wrt": graph.String("v")},
		ins(tt(f32, sh(1, 1), 1), tt(f32, sh(2, 1), 0, ln2), tt(f32, sh(2, 1), 3, 6), tt(f32, sh(1, 1), 5), tt(f32, sh(1, 1), 1), tt(f32, sh(1), ln3)),
		f32, sh(2, 1), []float64{1.0 / 3, 2.0 / 3}, 1e-7},
}

var movementCases = []opCase{
	{"transpose/2d", "transpose", graph.Attrs{"perm": graph.Ints(1, 0)}, ins(tt(f32, sh(2, 3), 1, 2, 3, 4, 5, 6)), f32, sh(3, 2),
		[]float64{1, 4, 2, 5, 3, 6}, 0},
	// x[a,b,c] = 100a+10b+c with shape [2,3,2]; out[i,j,k] = x[j,k,i] (perm [2,0,1]), shape [2,2,3].
	{"transpose/3d", "transpose", graph.Attrs{"perm": graph.Ints(2, 0, 1)},
		ins(tt(f64, sh(2, 3, 2), 0, 1, 10, 11, 20, 21, 100, 101, 110, 111, 120, 121)), f64, sh(2, 2, 3),
		[]float64{0, 10, 20, 100, 110, 120, 1, 11, 21, 101, 111, 121}, 0},
	{"reshape", "reshape", graph.Attrs{"shape": graph.Ints(3, -1)}, ins(tt(i8, sh(2, 3), 1, 2, 3, 4, 5, 6)), i8, sh(3, 2),
		[]float64{1, 2, 3, 4, 5, 6}, 0},
	{"slice", "slice", graph.Attrs{"starts": graph.Ints(1, 1), "ends": graph.Ints(3, 3)},
		ins(tt(f32, sh(3, 4), 0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23)), f32, sh(2, 2), []float64{11, 12, 21, 22}, 0},
	{"slice/3d", "slice", graph.Attrs{"starts": graph.Ints(1, 0, 1), "ends": graph.Ints(2, 2, 2)},
		ins(tt(f64, sh(2, 2, 2), 0, 1, 10, 11, 100, 101, 110, 111)), f64, sh(1, 2, 1), []float64{101, 111}, 0},
	{"concat/axis0", "concat", graph.Attrs{"axis": graph.Int(0)},
		ins(tt(f32, sh(1, 2), 1, 2), tt(f32, sh(2, 2), 3, 4, 5, 6)), f32, sh(3, 2), []float64{1, 2, 3, 4, 5, 6}, 0},
	{"concat/axis1_three", "concat", graph.Attrs{"axis": graph.Int(-1)},
		ins(tt(i32, sh(2, 1), 1, 2), tt(i32, sh(2, 2), 3, 4, 5, 6), tt(i32, sh(2, 1), 7, 8)), i32, sh(2, 4),
		[]float64{1, 3, 4, 7, 2, 5, 6, 8}, 0},
	{"concat/bool", "concat", graph.Attrs{"axis": graph.Int(0)},
		ins(tt(numerics.Bool, sh(1), 1), tt(numerics.Bool, sh(2), 0, 1)), numerics.Bool, sh(3), []float64{1, 0, 1}, 0},
	{"concat/one_input", "concat", graph.Attrs{"axis": graph.Int(0)}, ins(tt(f16, sh(2), negz, 1)), f16, sh(2), []float64{negz, 1}, 0},
}

func TestHandComputed(t *testing.T) {
	groups := map[string][]opCase{"unary": unaryCases, "binary": binaryCases, "cast": castCases, "reduce": reduceCases,
		"rowwise": rowCases, "matmul": matmulCases, "movement": movementCases, "spectral": spectralCases, "conv": convCases}
	covered := map[string]bool{}
	for group, cases := range groups {
		for _, c := range cases {
			covered[c.op] = true
			t.Run(group+"/"+c.name, func(t *testing.T) {
				got, err := runOp(c.op, c.attrs, c.in...)
				if err != nil {
					t.Fatal(err)
				}
				expectTensor(t, c.name, got, c.dt, c.shape, c.want, c.tol)
			})
		}
	}
	for _, d := range graph.Ops() {
		if !covered[d.Name] {
			t.Errorf("op %s has no hand-computed case", d.Name)
		}
	}
}
