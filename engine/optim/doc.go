// Package optim holds the optimizers: SGD (momentum, dampening, Nesterov, weight decay) and
// AdamW (decoupled weight decay), each an update graph of elementwise ops that the compiler
// fuses into kernels and any backend runs. They follow torch.optim's single-tensor
// (foreach=False) algorithms of torch 1.13 step for step, op for op.
//
// # API
//
//	type Optimizer interface { Kind() string; Step(b, params, grads, st) error }
//	type SGD struct{ LR, Momentum, Dampening, WeightDecay float64; Nesterov bool }
//	type AdamW struct{ LR, Beta1, Beta2, Eps, WeightDecay float64 }   // DefaultAdamW(): torch's defaults
//	func (o SGD|AdamW) Step(b backend.Backend, params, grads map[string]*tensor.Tensor, st *State) error
//	func (o SGD|AdamW) Graph(dt numerics.DType, shape []int, ...) (*graph.Graph, error)
//	type State                           // step count + per-param buffers, checkpointable
//	func NewState() *State
//	func (s *State) Tensors() map[string]*tensor.Tensor    // "<param>/momentum_buffer", "<param>/exp_avg", ...
//	func RestoreState(ts map[string]*tensor.Tensor, step int) (*State, error)
//
// Step updates every param in place (its Data is overwritten) and the state, or, on any
// error, nothing at all: inputs are checked and every update is computed before the first
// byte is written. Params run in name order. A missing grad, a grad for no param, a shape or
// dtype mismatch, a bad hyper-parameter is a coded error (E_INPUT, E_SHAPE, E_DTYPE) that names
// the param.
//
// # One program per (param shape, dtype)
//
// Hyper-parameters and everything that changes per step (lr, bias corrections) enter the update
// graph as scalar (shape []) inputs, so one compiled program serves every step and any
// learning-rate schedule. Programs are cached per optimizer kind, structure (momentum on/off,
// Nesterov, weight decay zero or not, dampening zero or not, SGD's first step), dtype and
// shape.
//
// # Numerics: how the bits match torch
//
// Python computes the scalars in double: 1 - lr*wd, 1 - beta**step, lr/bias_correction1,
// sqrt(bias_correction2). Go computes the same IEEE operations in float64 (each product
// rounded explicitly, so no platform fuses it into an FMA). beta**step is computed correctly
// rounded (math/big); Go's math.Pow is not (it differs from CPython's glibc pow in 7354 of the
// first 20000 steps of 0.999), while glibc's pow agreed with the correctly rounded value on
// every step 1..20000 for betas 0.9, 0.95, 0.98, 0.99, 0.999 and differed by one ulp (of a
// double) on 6 of them for 0.9999.
//
// A tensor op with a Python scalar computes in the tensor's dtype: torch converts the scalar
// to f32 for an f32 tensor (round to nearest even) and so do we: every scalar input of an f32
// update holds float32(value).
//
// torch's CPU kernels (AVX2 build, measured with torch 1.13 on this project's CI machines)
// round a + alpha*b (add_ with alpha) and self + value*t1*t2 (addcmul_) ONCE: a fused
// multiply-add, in the vector loop and in the tail alike; addcdiv_ divides, so it rounds each
// op; a tensor divided by a scalar is a true division, not a multiply by the reciprocal. The
// graph has no fma op, so an f32 update computes each such fma in f64: both factors are f32,
// their product is exact in f64, the sum rounds to f64 and then to f32. That equals the f32
// fma except when the f64 sum lands exactly halfway between two f32 values without being so
// exactly (double rounding): about one in 2^29 random operations. f64 params have no wider
// type: there the fma is a multiply then an add, two roundings, so f64 results may differ
// from torch's in the last bit of an element now and then (relative 1e-16 per step).
//
// # 16-bit params
//
// f16 and bf16 params (and their grads) keep their optimizer state in f32: the update casts
// param and grad to f32, runs the f32 update above and rounds the new param to its dtype
// (round to nearest even). There are no f32 master weights: an update smaller than half an ulp
// of the param is lost, as with torch on bf16 params. torch keeps bf16 state in bf16 and
// rounds after every op, so 16-bit results are not compared with torch bit for bit.
//
// # Kernels
//
// The compiler fuses chains: an elementwise node joins the kernel of one elementwise producer
// whose value nobody else reads and that is not a graph output. An op with two computed
// operands therefore ends a kernel, and every emulated fma has two (the widened product and
// the widened addend). Graph outputs are stored once and read by later kernels, so nothing is
// computed twice; the extra kernels are extra passes over memory, not redundant arithmetic.
// Kernels per update (TestKernelCounts; outputs in brackets; the ideal is one per output):
//
//	                                  f32  f64
//	sgd                          [1]   2    1
//	sgd, weight decay            [1]   3    1
//	sgd, momentum                [2]   3    2   (first step [1]: 2, 1)
//	sgd, momentum, nesterov, wd  [2]   6    3
//	sgd, momentum, dampening     [2]   4    3
//	adamw                        [3]   8    7
//	adamw, weight decay 0        [3]   7    6
//
// Agreement with torch 1.13 is checked outside this package, by package optimizers: every
// configuration of its grid (8 SGD, 12 AdamW; a learning-rate schedule; params of 1073, 29 and
// 1 elements; ten steps) against a per-element reference of torch's algorithm (suites/training:
// f32, f16 and bf16 bit for bit, f64 normwise 1e-14) and against torch.optim itself
// (suites/differential: the reference bit for bit in f32 and f64, this package bit for bit in
// f32). Observed: f64 params differ from torch in the last bits of some elements (normwise at
// most about 1e-15 of a tensor's largest element). Without the fma emulation f32 would be up
// to 50512 ulp off elementwise (3e-6 normwise) after ten steps.
package optim
