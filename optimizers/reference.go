package optimizers

import (
	"math"
	"math/big"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/optim"
)

// arith is one compute dtype's arithmetic on values held as float64: each op rounded once.
type arith struct {
	f32 bool
}

// round is v rounded to the compute dtype. For f32, +, *, / and sqrt of f32 values computed in
// f64 and rounded again to f32 are correctly rounded (f64 carries more than 2*24+2 bits).
func (a arith) round(v float64) float64 {
	if a.f32 {
		return float64(float32(v))
	}
	return v
}

// scalar is a Python double as torch feeds it to a tensor op: converted to the tensor's dtype.
func (a arith) scalar(v float64) float64 { return a.round(v) }

func (a arith) mul(x, y float64) float64 { return a.round(x * y) }
func (a arith) div(x, y float64) float64 { return a.round(x / y) }
func (a arith) add(x, y float64) float64 { return a.round(x + y) }
func (a arith) sqrt(x float64) float64   { return a.round(math.Sqrt(x)) }

// fma is x*y+z rounded once: exact in math/big, then one rounding to nearest even.
func (a arith) fma(x, y, z float64) float64 {
	if !a.f32 {
		return math.FMA(x, y, z)
	}
	p := new(big.Float).SetPrec(256).SetFloat64(x)
	p.Mul(p, new(big.Float).SetPrec(256).SetFloat64(y))
	p.Add(p, new(big.Float).SetPrec(256).SetFloat64(z))
	f, _ := p.Float32()
	return float64(f)
}

// pow is b**t rounded once to float64 (CPython's pow agrees for the betas the grid uses):
// the exact product of t copies of b needs 53*t bits.
func pow(b float64, t int) float64 {
	prec := uint(53*t + 64)
	r := new(big.Float).SetPrec(prec).SetFloat64(1)
	x := new(big.Float).SetPrec(prec).SetFloat64(b)
	for range t {
		r.Mul(r, x)
	}
	f, _ := r.Float64()
	return f
}

// refParam is one param of the reference: its value and buffers in the compute dtype, as
// float64 slices.
type refParam struct {
	p   []float64
	buf map[string][]float64
}

// refStep applies one step (t = 1, 2, ...) of o with learning rate lr to params, given their
// grads (values of the param dtype, decoded exactly). 16-bit params compute in f32 and round
// the new param to their dtype.
func refStep(o optim.Optimizer, lr float64, t int, dt numerics.DType, params map[string]*refParam, grads map[string][]float64) {
	a := arith{f32: dt != numerics.F64}
	for name, rp := range params {
		g := grads[name]
		switch o := o.(type) {
		case optim.SGD:
			refSGD(a, o, lr, t, rp, g)
		case optim.AdamW:
			refAdamW(a, o, lr, t, rp, g)
		}
		if dt == numerics.F16 || dt == numerics.BF16 {
			for i, v := range rp.p {
				rp.p[i] = numerics.Decode(dt, numerics.Encode(dt, v))
			}
		}
	}
}

// refSGD is torch 1.13's _single_tensor_sgd (maximize=False) on one param:
//
//	d_p = d_p.add(param, alpha=weight_decay)                 if weight_decay != 0
//	buf = clone(d_p) on the first step, else buf.mul_(momentum).add_(d_p, alpha=1-dampening)
//	d_p = d_p.add(buf, alpha=momentum) if nesterov else buf  if momentum != 0
//	param.add_(d_p, alpha=-lr)
func refSGD(a arith, o optim.SGD, lr float64, t int, rp *refParam, g []float64) {
	wd, mom, damp, negLR := a.scalar(o.WeightDecay), a.scalar(o.Momentum), a.scalar(1-o.Dampening), a.scalar(-lr)
	buf := rp.buf[optim.BufMomentum]
	if o.Momentum != 0 && buf == nil {
		buf = make([]float64, len(g))
		rp.buf[optim.BufMomentum] = buf
	}
	for i := range g {
		d := g[i]
		if o.WeightDecay != 0 {
			d = a.fma(rp.p[i], wd, d)
		}
		if o.Momentum != 0 {
			if t == 1 {
				buf[i] = d
			} else {
				buf[i] = a.fma(d, damp, a.mul(buf[i], mom))
			}
			if o.Nesterov {
				d = a.fma(buf[i], mom, d)
			} else {
				d = buf[i]
			}
		}
		rp.p[i] = a.fma(d, negLR, rp.p[i])
	}
}

// refAdamW is torch 1.13's _single_tensor_adamw (amsgrad=False, maximize=False) on one param:
//
//	param.mul_(1 - lr*weight_decay)
//	exp_avg.mul_(beta1).add_(grad, alpha=1-beta1)
//	exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1-beta2)
//	denom = (exp_avg_sq.sqrt() / sqrt(1 - beta2**t)).add_(eps)
//	param.addcdiv_(exp_avg, denom, value=-lr/(1 - beta1**t))
//
// addcmul_ is self + (value*t1)*t2 with the last multiply-add fused; addcdiv_ is
// self + (value*t1)/t2, each op rounded.
func refAdamW(a arith, o optim.AdamW, lr float64, t int, rp *refParam, g []float64) {
	bc1 := 1 - pow(o.Beta1, t)
	bc2 := 1 - pow(o.Beta2, t)
	decay := a.scalar(1 - float64(lr*o.WeightDecay))
	b1, b2 := a.scalar(o.Beta1), a.scalar(o.Beta2)
	omb1, omb2 := a.scalar(1-o.Beta1), a.scalar(1-o.Beta2)
	bc2sqrt, eps, negStep := a.scalar(math.Sqrt(bc2)), a.scalar(o.Eps), a.scalar(-(lr / bc1))
	m, v := rp.buf[optim.BufExpAvg], rp.buf[optim.BufExpAvgSq]
	if m == nil {
		m, v = make([]float64, len(g)), make([]float64, len(g))
		rp.buf[optim.BufExpAvg], rp.buf[optim.BufExpAvgSq] = m, v
	}
	for i := range g {
		p := rp.p[i]
		if o.WeightDecay != 0 {
			p = a.mul(p, decay)
		}
		m[i] = a.fma(g[i], omb1, a.mul(m[i], b1))
		v[i] = a.fma(a.mul(g[i], omb2), g[i], a.mul(v[i], b2))
		den := a.add(a.div(a.sqrt(v[i]), bc2sqrt), eps)
		rp.p[i] = a.add(p, a.div(a.mul(m[i], negStep), den))
	}
}
