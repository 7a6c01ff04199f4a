package optim

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// SGD is torch.optim.SGD (maximize=False, foreach=False): per param, with d the grad,
//
//	d = d + weight_decay*p                       (when weight_decay != 0)
//	buf = d on the first step, else buf = momentum*buf + (1-dampening)*d   (when momentum != 0)
//	d = d + momentum*buf if nesterov, else d = buf                         (when momentum != 0)
//	p = p - lr*d
//
// The zero value is plain SGD with lr 0; torch has no default lr either.
type SGD struct {
	LR, Momentum, Dampening, WeightDecay float64
	Nesterov                             bool
}

// Kind is KindSGD.
func (SGD) Kind() string { return KindSGD }

// check applies torch's argument checks.
func (o SGD) check() error {
	switch {
	case !finite(o.LR, o.Momentum, o.Dampening, o.WeightDecay):
		return errs.New(errs.Input, "optim: sgd hyper-parameters must be finite: %+v", o)
	case o.LR < 0:
		return errs.New(errs.Input, "optim: sgd: invalid learning rate %v", o.LR)
	case o.Momentum < 0:
		return errs.New(errs.Input, "optim: sgd: invalid momentum %v", o.Momentum)
	case o.WeightDecay < 0:
		return errs.New(errs.Input, "optim: sgd: invalid weight_decay %v", o.WeightDecay)
	case o.Nesterov && (o.Momentum <= 0 || o.Dampening != 0):
		return errs.New(errs.Input, "optim: sgd: nesterov momentum requires a momentum and zero dampening")
	}
	return nil
}

// structure names what changes the graph, as opposed to the scalar inputs.
func (o SGD) structure(first bool) string {
	return fmt.Sprintf("momentum=%t,nesterov=%t,wd=%t,dampening=%t,first=%t",
		o.Momentum != 0, o.Nesterov, o.WeightDecay != 0, o.Dampening != 0, first && o.Momentum != 0)
}

// Graph returns the update graph for one param of dtype dt and shape. first selects the first
// step with momentum, where the buffer is a copy of the (decayed) grad rather than an input.
// Inputs: param, grad, momentum_buffer (not on the first step), and scalars; outputs:
// param.new and, with momentum, momentum_buffer.new (absent on a first step whose buffer is
// the grad itself: Step copies it).
func (o SGD) Graph(dt numerics.DType, shape []int, first bool) (*graph.Graph, error) {
	if !paramDType(dt) {
		return nil, errs.New(errs.DType, "optim: sgd on %s params: optimizers take f64, f32, f16 or bf16", dt)
	}
	return o.ub(dt, shape, first).build()
}

func (o SGD) ub(dt numerics.DType, shape []int, first bool) *ub {
	u := newUB("sgd", dt, shape)
	pin := u.tensorIn(inParam, dt)
	gin := u.tensorIn(inGrad, dt)
	p, d := u.cast(pin, u.cd), u.cast(gin, u.cd)
	if o.WeightDecay != 0 {
		d = u.fma(p, u.scalar("weight_decay"), d) // d_p.add(param, alpha=weight_decay)
	}
	if o.Momentum != 0 {
		var buf *graph.Value
		if first && o.Momentum != 0 {
			buf = d // torch.clone(d_p)
			if failpoint.Enabled(failpoint.OptimSGDFirstStepDampened) {
				buf = u.mul(d, u.scalar("one_minus_dampening"))
			}
			if buf != gin {
				u.output(BufMomentum, buf)
			}
		} else {
			x := u.mul(u.tensorIn(BufMomentum, u.cd), u.scalar("momentum"))
			if o.Dampening == 0 {
				buf = u.add(x, d) // alpha 1: one rounding either way
			} else {
				buf = u.fma(d, u.scalar("one_minus_dampening"), x) // buf.mul_(momentum).add_(d_p, alpha=1-dampening)
			}
			u.output(BufMomentum, buf)
		}
		if o.Nesterov && !failpoint.Enabled(failpoint.OptimSGDNesterovIgnored) {
			d = u.fma(buf, u.scalar("momentum"), d) // d_p.add(buf, alpha=momentum)
		} else {
			d = buf
		}
	}
	u.output(inParam, u.fma(d, u.scalar("neg_lr"), p)) // param.add_(d_p, alpha=-lr)
	return u
}

// Step applies one SGD step; see Optimizer.
func (o SGD) Step(b backend.Backend, params, grads map[string]*tensor.Tensor, st *State) error {
	vals := map[string]float64{
		"weight_decay":        o.WeightDecay,
		"momentum":            o.Momentum,
		"one_minus_dampening": 1 - o.Dampening,
		"neg_lr":              -o.LR,
	}
	return step(KindSGD, b, params, grads, st, o.check(), func(name string, p, g *tensor.Tensor) (map[string]*tensor.Tensor, error) {
		old := st.get(name, BufMomentum)
		first := old == nil
		up, err := cached(cacheKey(KindSGD, o.structure(first), p.DType, p.Shape), func() (*update, error) {
			return compileUpdate(o.ub(p.DType, p.Shape, first))
		})
		if err != nil {
			return nil, err
		}
		ins := map[string]*tensor.Tensor{inParam: p, inGrad: g}
		if !first && o.Momentum != 0 {
			ins[BufMomentum] = old
		}
		out, err := up.run(b, ins, vals)
		if err != nil {
			return nil, err
		}
		if o.Momentum != 0 && out[BufMomentum] == nil {
			out[BufMomentum] = g.Clone() // first step, no decay, grad already in the state dtype
		}
		return out, nil
	})
}
