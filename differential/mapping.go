package differential

import (
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// OpMapping says what each oracle computes for one registry op and where its semantics differ
// from Tessera's contract (engine/graph/ops.go). The scripts under oracles/ implement it; the
// package tests check that this table, both scripts and the op registry list the same ops.
type OpMapping struct {
	Op    string `json:"op"`
	Torch string `json:"torch"`
	JAX   string `json:"jax"`
	// Notes name every difference from the contract and how the oracle handles it. The
	// explicit spec of each difference is in suites/differential/semantics_test.go.
	Notes string `json:"notes"`
}

// Common handling, applied by every row below (docs/differential.md):
//   - fp8 inputs travel as exact f32 values, the oracle computes in f32, and fp8 outputs are
//     rounded by numerics.Encode (saturating, as the engine does). Movement ops move fp8 bits
//     as uint8. torch 1.13 has no float8, and torch 2.x float8 casts do not saturate.
//   - a 16-bit float op torch has no kernel for on the device runs in f32 and is rounded once.
//   - JAX: XLA keeps 16-bit intermediates in transcendentals, reductions, softmax, norms,
//     losses and matmuls, so those run in f32 for f16/bf16 inputs and are rounded once.
//   - outputs are compared with harness.Check under the golden spec's tolerance.
//
// Mapping holds the rows of ops in this tree's op registry; AllMappings also those ahead of it.
var Mapping = registered(slices.Concat(mappingRows, spectralRows))

// AheadOfRegistry names ops that the scripts and this table map before this tree's op registry
// has them (issue 10: the core tree adds them). Mapping leaves their rows out until
// graph.Lookup finds the op, so that `tessera-qa diff --mapping` and the differential report
// list only ops the engine can build; hand-written wire cases reach the scripts already
// (TestTorchOracleNewOpsByWire), and MappingOf finds their rows.
var AheadOfRegistry = []string{}

// AllMappings is every row, including the ops ahead of the registry.
func AllMappings() []OpMapping { return slices.Concat(mappingRows, spectralRows) }

func registered(rows []OpMapping) []OpMapping {
	var out []OpMapping
	for _, m := range rows {
		if _, ok := graph.Lookup(m.Op); ok {
			out = append(out, m)
		}
	}
	return out
}

var mappingRows = []OpMapping{
	{"neg", "torch.neg", "jnp.negative", "ints wrap: neg(-128) = -128 in int8, in both"},
	{"abs", "torch.abs", "jnp.abs", "ints wrap: abs(-128) = -128 in int8, in both"},
	{"relu", "torch.relu", "jnp.maximum(x, 0)", "relu(-0) is +0 here, -0 in torch: only a bitwise check could see it; NaN stays NaN in both"},
	{"exp", "torch.exp", "jnp.exp (f32 for f16/bf16)", ""},
	{"log", "torch.log", "jnp.log (f32 for f16/bf16)", "log(0) = -Inf, log(<0) = NaN in both"},
	{"sqrt", "torch.sqrt", "jnp.sqrt (f32 for f16/bf16)", ""},
	{"rsqrt", "torch.rsqrt", "lax.rsqrt (f32 for f16/bf16)", ""},
	{"tanh", "torch.tanh", "jnp.tanh (f32 for f16/bf16)", ""},
	{"erf", "torch.erf", "jax.lax.erf (f32 for f16/bf16)", ""},
	{"sigmoid", "torch.sigmoid", "jax.nn.sigmoid (f32 for f16/bf16)", ""},
	{"silu", "F.silu", "jax.nn.silu (f32 for f16/bf16)", "f16/bf16 in f32, rounded once: torch 1.13's bf16 silu rounds x*sigmoid(x)'s intermediate"},
	{"gelu", "F.gelu(approximate='none'|'tanh')", "jax.nn.gelu(approximate=False|True) (f32 for f16/bf16)",
		"approx=erf is torch's 'none' and jax's approximate=False (jax defaults to tanh); f16/bf16 in f32, rounded once: torch 1.13's bf16 tanh form rounds intermediates"},
	{"add", "torch.add", "jnp.add", "ints wrap at the dtype's width in both"},
	{"sub", "torch.sub", "jnp.subtract", "ints wrap in both"},
	{"mul", "torch.mul", "jnp.multiply", "ints wrap in both"},
	{"div", "torch.div (true division); rounding_mode trunc/floor: torch.div(rounding_mode=...)", "jnp.true_divide",
		"rounding_mode: ints divide exactly (int64, wrapped once) and x/0 is 0 here, torch raises ZeroDivisionError (the oracle divides by 1 and puts 0 back; torch's int32 INT_MIN // -1 dies of SIGFPE, here it wraps); trunc truncates the quotient rounded to the dtype, as torch; floor is the exact floor of a/b (torch's f32/f64 result while |a/b| < 2^24 / 2^53), f16/bf16 in f32, rounded once (torch 1.13's bf16 floor rounds a - fmod(a,b) to bf16: off by one in about 0.5% of pairs); floats: x/0 is ±Inf or NaN in both; gradient 0 for both operands, as torch's. JAX: jnp.trunc of the quotient, jnp.floor_divide (f16/bf16 in f32), ints as torch's mapping (written without a JAX install here: unmeasured)"},
	{"maximum", "torch.maximum", "jnp.maximum", "NaN propagates in both; maximum(-0, +0) is +0 here, the first operand in torch"},
	{"minimum", "torch.minimum", "jnp.minimum", "NaN propagates in both"},
	{"cast", "Tensor.to", "astype",
		"float->int saturates and maps NaN to 0 here; torch wraps (200.0 -> int8 is -56) and sends NaN/out-of-range int32 to INT_MIN, so the oracle clamps in f64 and truncates. f64/int32 -> f16/bf16 rounds once here; torch rounds through f32 (double rounding), so the oracle rounds to odd in f32 first. ->bool is x != 0 (NaN is true) in both"},
	{"reduce_sum", "torch.sum(dtype=float32 for f16/bf16)", "jnp.sum in f32 for f16/bf16",
		"ints: int64 sum wrapped once (equal to wrapping each step). torch 1.13's CPU bf16 sum rounds partial sums to bf16, so 16-bit floats are summed with dtype=float32 (accum=<storage dtype> keeps torch's own accumulation). axes=[] reduces every axis in both (torch.sum(x, dim=[])), keepdims keeps them as 1; a scalar takes axis 0 or -1 (its one element) in both; zero-size dims do not exist here"},
	{"reduce_max", "torch.amax", "jnp.max", "NaN propagates in both"},
	{"reduce_mean", "torch.mean(dtype=float32 for f16/bf16)", "jnp.mean in f32 for f16/bf16", "as reduce_sum"},
	{"softmax", "F.softmax", "jax.nn.softmax (f32 for f16/bf16)", "a row of all -Inf is NaN in both"},
	{"log_softmax", "F.log_softmax", "jax.nn.log_softmax (f32 for f16/bf16)", "a row of all -Inf is NaN in both"},
	{"layernorm", "F.layer_norm", "composite in f32", "f16/bf16 in f32, rounded once: torch 1.13's bf16 layer_norm rounds intermediates"},
	{"rmsnorm", "composite: x*rsqrt(mean(x^2)+eps)*gamma in f32 (f64 for f64)", "same composite", "torch 1.13 has no rms_norm; rounded once"},
	{"matmul", "torch.matmul; ints as int64 on the CPU", "jnp.matmul (f32 accumulation for f16/bf16, precision highest)",
		"accum and tile are ignored: cuBLAS and torch CPU with bf16 instructions accumulate 16-bit floats in f32 (TF32 and reduced-precision reductions are switched off); where a probe finds that torch sums 16-bit matmuls in the 16-bit type (torch 1.13 on CPUs without avx512_bf16), they run in f32, rounded once. torch has no integer GEMM on CUDA, so ints run on the CPU in int64, wrapped once"},
	{"batch_matmul", "torch.matmul", "jnp.matmul", "as matmul"},
	{"scaled_matmul", "torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype, use_fast_accum=False) on CUDA with float8; else a composite in f32",
		"composite in f32",
		"b is [N,K] here, so torch gets b.t() (the column-major [K,N] operand it wants); a and b travel as exact f32 and go back to e4m3 exactly. torch 1.13 (no float8), the CPU and shapes _scaled_mm refuses (dims not multiples of 16) use the composite: f32 products (exact) summed in f32 times scale_a*scale_b, rounded once; tile is ignored; no gradient (torch._scaled_mm has none)"},
	{"attention", "F.scaled_dot_product_attention (torch >= 2.1), else a composite in f32", "composite in f32",
		"causal masks key j > query i (top-left), as torch's is_causal; the composite rounds once, torch's fused kernels may round probabilities to f16/bf16 (the spec's tolerance allows it)"},
	{"transpose", "permute", "jnp.transpose", "bitwise: fp8 moves as uint8"},
	{"reshape", "reshape", "jnp.reshape", "bitwise"},
	{"slice", "indexing", "indexing", "bitwise"},
	{"concat", "torch.cat", "jnp.concatenate", "bitwise"},
	{"mse_loss", "F.mse_loss(reduction=mean|sum|none)", "mean((a-b)^2) in f32 for f16/bf16", "f16/bf16 in f32, rounded once (torch 1.13 has no CPU bf16 mse kernel); reduction none is (a-b)^2 per element, a's shape, in both (jnp.mean, jnp.sum or none)"},
	{"full_like", "torch.full_like; f16/bf16: torch.full in f64, rounded once", "jnp.full; f16/bf16 from f64, rounded once",
		"value rounded once to the dtype: torch 1.13 rounds f64 -> f16/bf16 through f32 (value 1+2^-8+2^-30 gives bf16 1.0, one rounding 1.0078125), so the oracle rounds to odd in f32 first; ints truncate and saturate as cast does (torch refuses 300.0 for int8); bool is value != 0; fp8 comes back as f32 and is rounded by numerics.Encode (value -> f32 -> fp8 is two roundings, off only within 2^-24 relative of an fp8 midpoint); no gradient reaches x"},
	{"sign", "torch.sign, NaN put back with torch.where(isnan), -0 -> +0", "jnp.sign, -0 -> +0",
		"sign(NaN) = NaN: torch 1.13's sign gives 0 for NaN (measured, f32/f16/bf16), jnp.sign keeps NaN; sign(+-0) = +0: torch 1.13 CPU gives +0, XLA -0; ints -1/0/+1 in both; gradient 0 everywhere, NaN included, as torch's"},
	{"attention_lse", "composite: torch.logsumexp of the masked scores in f32 (f64 for f64)", "jax.nn.logsumexp, the same composite",
		"q[...,Sq,D], k[...,Sk,D] -> [...,Sq] in f32 (f64 for f64 q) whatever q's dtype; causal masks key j > query i (top-left, as torch's is_causal); scale absent is 1/sqrt(D); accum ignored; differentiable (its gradient is the softmax weights)"},
	{"attention_grad", "torch.autograd.grad of the composite attention in f32 (f64 for f64)", "jax.vjp of the same composite",
		"o and lse are ignored: the oracle recomputes attention itself, so it checks the engine's backward kernel independently of its forward; inputs q, k, v, o, do share q's dtype, lse is f32 (f64 for f64 q); the result has the wrt input's shape and q's dtype, rounded once; it has no gradient itself (no second order)"},
}

// GradRule is one measured fact about torch's gradients at ties, signed zeros, NaN and the
// edges of a domain: the gradient of sum(op(inputs...)) with respect to each input, in f64.
// Tessera's autodiff follows torch here (issue 10). TestTorchGradRules measures every rule
// again on the installed torch, through Oracle.VJP.
type GradRule struct {
	Op     string
	Inputs [][]float64
	Grads  [][]float64
	Note   string
}

var nan, inf = math.NaN(), math.Inf(1)

// TorchGradRules is what torch 1.13.0 (CPU, f64) does, measured 2026-11-25. Reductions here
// reduce every axis of a vector.
var TorchGradRules = []GradRule{
	{"maximum", [][]float64{{1, 2, math.Copysign(0, -1), nan, 1, -inf}, {1, 3, 0, 1, nan, -inf}},
		[][]float64{{0.5, 0, 0.5, 1, 1, 0.5}, {0.5, 1, 0.5, 1, 1, 0.5}},
		"a tie (-0 = +0 and -Inf = -Inf count as ties) splits the gradient equally; where either operand is NaN both get all of it"},
	{"minimum", [][]float64{{1, 2, math.Copysign(0, -1), nan, 1, -inf}, {1, 3, 0, 1, nan, -inf}},
		[][]float64{{0.5, 1, 0.5, 1, 1, 0.5}, {0.5, 0, 0.5, 1, 1, 0.5}},
		"as maximum"},
	{"reduce_max", [][]float64{{3, 1, 3, 3}}, [][]float64{{1.0 / 3, 0, 1.0 / 3, 1.0 / 3}},
		"torch.amax splits the gradient evenly among all maxima (torch.max(dim) would give it to one index)"},
	{"reduce_max", [][]float64{{math.Copysign(0, -1), 0, -1}}, [][]float64{{0.5, 0.5, 0}}, "-0 and +0 tie"},
	{"reduce_max", [][]float64{{nan, 1, 2}}, [][]float64{{nan, nan, nan}},
		"a NaN maximum makes every element's gradient NaN (no element equals the NaN result: the count of maxima is 0)"},
	{"relu", [][]float64{{0, math.Copysign(0, -1), 1, -1, nan}}, [][]float64{{0, 0, 1, 0, 1}},
		"relu'(+-0) = 0; relu'(NaN) = 1 (the gradient passes unless x <= 0)"},
	{"abs", [][]float64{{0, math.Copysign(0, -1), 1, -1, nan}}, [][]float64{{0, 0, 1, -1, 0}},
		"abs'(x) = sgn(x): 0 at +-0 and at NaN"},
	{"sqrt", [][]float64{{0, math.Copysign(0, -1), 4, -1, nan}}, [][]float64{{inf, -inf, 0.25, nan, nan}},
		"sqrt'(+0) = +Inf, sqrt'(-0) = -Inf (1/(2*sqrt(-0)) with sqrt(-0) = -0); NaN below 0"},
}

// MappingOf returns the mapping of op, if any (ops ahead of the registry included).
func MappingOf(op string) (OpMapping, bool) {
	for _, m := range AllMappings() {
		if m.Op == op {
			return m, true
		}
	}
	return OpMapping{}, false
}
