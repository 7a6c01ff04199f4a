// Package optimizers checks the engine's optimizers (engine/optim) update by update against an
// independent reference and against torch.optim itself.
//
// The reference (reference.go) is torch 1.13's single-tensor SGD and AdamW written out per
// element, each tensor op of torch's Python rounded once in the param's compute dtype (f32 for
// f32, f16 and bf16 params, f64 for f64), add_ with alpha and addcmul_ as one fused
// multiply-add, computed exactly with math/big and rounded once: it shares no code with
// engine/optim (which builds update graphs and emulates the f32 fma in f64) beyond the dtype
// conversions of engine/numerics, which suites/rounding checks on their own. Python's scalar
// arithmetic (1 - lr*wd, 1 - beta**t, lr/bc1, sqrt(bc2)) is done in float64 as CPython does,
// beta**t exactly and rounded once.
//
// What agrees with what (Check, CheckTorch):
//
//	engine vs reference, f32, f16, bf16 params: every param and buffer bit for bit, every step
//	engine vs reference, f64: normwise (engine/optim rounds each fma twice in f64, torch once)
//	torch  vs reference, f32 and f64: bit for bit (this is what makes the reference torch's)
//
// Configs is the grid every check runs: SGD with and without momentum, dampening, Nesterov and
// weight decay; AdamW over several betas, learning rates, epsilons and weight decays including
// zero. suites/training runs Check (no torch needed, so the mutation check's CI run catches a
// changed update rule), suites/differential runs CheckTorch.
package optimizers
