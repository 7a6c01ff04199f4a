package optim

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// AdamW is torch.optim.AdamW (amsgrad=False, maximize=False, foreach=False): per param, at step
// t = State.Step+1, with g the grad,
//
//	p = p * (1 - lr*weight_decay)
//	m = m*beta1 + (1-beta1)*g
//	v = v*beta2 + (1-beta2)*g*g
//	p = p + (-lr/(1-beta1^t)) * m / (sqrt(v)/sqrt(1-beta2^t) + eps)
//
// The zero value is not usable (lr 0); start from DefaultAdamW.
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
}

// DefaultAdamW returns torch's defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 1e-2.
func DefaultAdamW() AdamW {
	return AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-2}
}

// Kind is KindAdamW.
func (AdamW) Kind() string { return KindAdamW }

// check applies torch's argument checks.
func (o AdamW) check() error {
	switch {
	case !finite(o.LR, o.Beta1, o.Beta2, o.Eps, o.WeightDecay):
		return errs.New(errs.Input, "optim: adamw hyper-parameters must be finite: %+v", o)
	case o.LR < 0:
		return errs.New(errs.Input, "optim: adamw: invalid learning rate %v", o.LR)
	case o.Eps < 0:
		return errs.New(errs.Input, "optim: adamw: invalid epsilon %v", o.Eps)
	case o.Beta1 < 0 || o.Beta1 >= 1:
		return errs.New(errs.Input, "optim: adamw: invalid beta1 %v (want 0 <= beta1 < 1)", o.Beta1)
	case o.Beta2 < 0 || o.Beta2 >= 1:
		return errs.New(errs.Input, "optim: adamw: invalid beta2 %v (want 0 <= beta2 < 1)", o.Beta2)
	case o.WeightDecay < 0:
		return errs.New(errs.Input, "optim: adamw: invalid weight_decay %v", o.WeightDecay)
	}
	return nil
}

func (o AdamW) structure() string {
	if o.WeightDecay == 0 {
		return "wd=false" // p*1 is p: the multiply is skipped, bits unchanged
	}
	return "wd=true"
}

// Graph returns the update graph for one param of dtype dt and shape. Inputs: param, grad,
// exp_avg, exp_avg_sq and scalars; outputs: exp_avg.new, exp_avg_sq.new, param.new.
func (o AdamW) Graph(dt numerics.DType, shape []int) (*graph.Graph, error) {
	if !paramDType(dt) {
		return nil, errs.New(errs.DType, "optim: adamw on %s params: optimizers take f64, f32, f16 or bf16", dt)
	}
	return o.ub(dt, shape).build()
}

func (o AdamW) ub(dt numerics.DType, shape []int) *ub {
	u := newUB("adamw", dt, shape)
	p := u.cast(u.tensorIn(inParam, dt), u.cd)
	g := u.cast(u.tensorIn(inGrad, dt), u.cd)
	m := u.tensorIn(BufExpAvg, u.cd)
	v := u.tensorIn(BufExpAvgSq, u.cd)
	switch {
	case o.WeightDecay != 0 && failpoint.Enabled(failpoint.OptimAdamWDecayCoupled):
		g = u.fma(p, u.scalar("weight_decay"), g) // Adam's L2 penalty, not AdamW's decay
	case o.WeightDecay != 0:
		p = u.mul(p, u.scalar("decay")) // param.mul_(1 - lr*weight_decay)
	}
	// exp_avg.mul_(beta1).add_(grad, alpha=1-beta1)
	m = u.fma(g, u.scalar("one_minus_beta1"), u.mul(m, u.scalar("beta1")))
	u.output(BufExpAvg, m)
	// exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1-beta2): self + (value*g)*g
	v = u.fma(u.mul(g, u.scalar("one_minus_beta2")), g, u.mul(v, u.scalar("beta2")))
	u.output(BufExpAvgSq, v)
	// denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
	den := u.add(u.div(u.op("sqrt", v), u.scalar("bias_correction2_sqrt")), u.scalar("eps"))
	if failpoint.Enabled(failpoint.OptimAdamWEpsBeforeBC2) {
		den = u.div(u.add(u.op("sqrt", v), u.scalar("eps")), u.scalar("bias_correction2_sqrt"))
	}
	// param.addcdiv_(exp_avg, denom, value=-step_size): p + (value*m)/denom
	u.output(inParam, u.add(p, u.div(u.mul(m, u.scalar("neg_step_size")), den)))
	return u
}

// scalars returns the hyper-parameter values of step t, computed in float64 as Python does.
// Every product is converted explicitly so that no platform fuses it into an FMA.
func (o AdamW) scalars(t int) map[string]float64 {
	bc1 := 1 - powRN(o.Beta1, t)
	bc2 := 1 - powRN(o.Beta2, t)
	return map[string]float64{
		"decay":                 1 - float64(o.LR*o.WeightDecay),
		"beta1":                 o.Beta1,
		"beta2":                 o.Beta2,
		"one_minus_beta1":       1 - o.Beta1,
		"one_minus_beta2":       1 - o.Beta2,
		"bias_correction2_sqrt": failpoint.Pick(failpoint.OptimAdamWBiasCorrection2Off, math.Sqrt(bc2), 1),
		"weight_decay":          o.WeightDecay, // only a planted fault's graph reads it
		"eps":                   o.Eps,
		"neg_step_size":         -(o.LR / bc1),
	}
}

// Step applies one AdamW step; see Optimizer. A param without state starts from zero moments,
// but only on the state's first step: torch counts steps per param, this package per state.
func (o AdamW) Step(b backend.Backend, params, grads map[string]*tensor.Tensor, st *State) error {
	var vals map[string]float64
	if st != nil {
		vals = o.scalars(st.Step + 1)
	}
	return step(KindAdamW, b, params, grads, st, o.check(), func(name string, p, g *tensor.Tensor) (map[string]*tensor.Tensor, error) {
		m, v := st.get(name, BufExpAvg), st.get(name, BufExpAvgSq)
		cd := computeDType(p.DType)
		if m == nil || v == nil {
			if st.Step > 0 {
				return nil, errs.New(errs.Input, "optim: param %q has no adamw state at step %d (restore a checkpoint that has it, or start a new State)", name, st.Step)
			}
			m, v = tensor.New(cd, p.Shape), tensor.New(cd, p.Shape)
		}
		up, err := cached(cacheKey(KindAdamW, o.structure(), p.DType, p.Shape), func() (*update, error) {
			return compileUpdate(o.ub(p.DType, p.Shape))
		})
		if err != nil {
			return nil, err
		}
		return up.run(b, map[string]*tensor.Tensor{inParam: p, inGrad: g, BufExpAvg: m, BufExpAvgSq: v}, vals)
	})
}
