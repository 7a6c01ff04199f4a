// Package optim holds the optimizers: SGD (momentum, dampening, Nesterov, weight decay) and
// AdamW (decoupled weight decay). Each update is a graph of elementwise ops that the compiler
// fuses into kernels, so every backend runs it; the op order follows torch.optim's
// single-tensor (foreach=False) algorithms of torch 1.13. Per-step scalars (decay factor,
// bias corrections, step size) are shape-[] inputs computed in float64 on the host and
// rounded once to the parameter's dtype, so one compiled program serves every step.
package optim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// SGD is torch.optim.SGD.
type SGD struct {
	LR, Momentum, Dampening, WeightDecay float64
	Nesterov                             bool
}

// AdamW is torch.optim.AdamW (amsgrad off).
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
}

// DefaultAdamW is torch's default AdamW.
func DefaultAdamW() AdamW {
	return AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-2}
}

// State is an optimizer's step count and per-parameter buffers.
type State struct {
	Step    int
	Buffers map[string]*tensor.Tensor // "<param>/exp_avg", "<param>/exp_avg_sq", "<param>/momentum_buffer"
}

// NewState is the state before the first step.
func NewState() *State { return &State{Buffers: map[string]*tensor.Tensor{}} }

// Tensors returns the buffers (shared, not copied) for a checkpoint.
func (s *State) Tensors() map[string]*tensor.Tensor { return s.Buffers }

// RestoreState rebuilds a state from a checkpoint's tensors and step.
func RestoreState(ts map[string]*tensor.Tensor, step int) (*State, error) {
	if step < 0 {
		return nil, errs.New(errs.Input, "optim: restore: step %d < 0", step)
	}
	s := NewState()
	s.Step = step
	for k, v := range ts {
		s.Buffers[k] = v
	}
	return s, nil
}

// programs caches compiled update programs by structure, dtype and shape.
var programs sync.Map

func compiled(key string, build func() (*graph.Graph, error)) (*compiler.Program, error) {
	if p, ok := programs.Load(key); ok {
		return p.(*compiler.Program), nil
	}
	g, err := build()
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "optim: update graph %s", key)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		return nil, err
	}
	programs.Store(key, p)
	return p, nil
}

// scalars builds a shape-[] input per name.
func scalars(b *graph.Builder, dt numerics.DType, names ...string) map[string]*graph.Value {
	out := map[string]*graph.Value{}
	for _, n := range names {
		out[n] = b.Input(n, dt)
	}
	return out
}

func scalar(dt numerics.DType, v float64) *tensor.Tensor {
	t := tensor.New(dt, nil)
	t.SetFloat64(0, v)
	return t
}

// check verifies that every param has a grad of its type and no grad is extra; it returns
// the param names in order.
func check(params, grads map[string]*tensor.Tensor) ([]string, error) {
	names := make([]string, 0, len(params))
	for n, p := range params {
		g, ok := grads[n]
		switch {
		case !ok:
			return nil, errs.New(errs.Input, "optim: param %s has no gradient", n)
		case g.DType != p.DType:
			return nil, errs.New(errs.DType, "optim: param %s is %s, its gradient %s", n, p.TypeString(), g.TypeString())
		case !slices.Equal(g.Shape, p.Shape):
			return nil, errs.New(errs.Shape, "optim: param %s is %s, its gradient %s", n, p.TypeString(), g.TypeString())
		case !p.DType.IsFloat():
			return nil, errs.New(errs.DType, "optim: param %s is %s: only float params are optimized", n, p.TypeString())
		}
		names = append(names, n)
	}
	for n := range grads {
		if _, ok := params[n]; !ok {
			return nil, errs.New(errs.Input, "optim: gradient %s belongs to no param", n)
		}
	}
	sort.Strings(names)
	return names, nil
}

func key(kind string, p *tensor.Tensor) string { return kind + "|" + p.TypeString() }

// Step applies one AdamW step to every param (in place) and advances st. Nothing is written
// unless every update was computed.
func (o AdamW) Step(b backend.Backend, params, grads map[string]*tensor.Tensor, st *State) error {
	if !(o.LR >= 0) || !(o.Beta1 >= 0 && o.Beta1 < 1) || !(o.Beta2 >= 0 && o.Beta2 < 1) || !(o.Eps >= 0) || !(o.WeightDecay >= 0) {
		return errs.New(errs.Input, "optim: AdamW %+v: want lr, eps, weight_decay >= 0 and betas in [0, 1)", o)
	}
	names, err := check(params, grads)
	if err != nil {
		return err
	}
	step := st.Step + 1
	type upd struct{ p, m, v *tensor.Tensor }
	res := map[string]upd{}
	for _, n := range names {
		p, g := params[n], grads[n]
		dt := p.DType
		m, v := st.Buffers[n+"/exp_avg"], st.Buffers[n+"/exp_avg_sq"]
		if m == nil {
			m, v = tensor.New(dt, slices.Clone(p.Shape)), tensor.New(dt, slices.Clone(p.Shape))
		}
		prog, err := compiled(key("adamw", p), func() (*graph.Graph, error) { return adamwGraph(dt, p.Shape) })
		if err != nil {
			return err
		}
		bc1, bc2 := 1-math.Pow(o.Beta1, float64(step)), 1-math.Pow(o.Beta2, float64(step))
		outs, err := b.Run(prog, map[string]*tensor.Tensor{"p": p, "g": g, "m": m, "v": v,
			"decay": scalar(dt, 1-o.LR*o.WeightDecay), "beta1": scalar(dt, o.Beta1), "one_minus_beta1": scalar(dt, 1-o.Beta1),
			"beta2": scalar(dt, o.Beta2), "one_minus_beta2": scalar(dt, 1-o.Beta2), "bc2_sqrt": scalar(dt, math.Sqrt(bc2)),
			"eps": scalar(dt, o.Eps), "neg_step_size": scalar(dt, -o.LR/bc1)})
		if err != nil {
			return errs.Wrap(errs.CodeOf(err), err, "optim: AdamW param %s", n)
		}
		res[n] = upd{outs[0], outs[1], outs[2]}
	}
	for _, n := range names {
		copy(params[n].Data, res[n].p.Data)
		st.Buffers[n+"/exp_avg"], st.Buffers[n+"/exp_avg_sq"] = res[n].m, res[n].v
	}
	st.Step = step
	return nil
}

// adamwGraph: p' = p*decay + (m'/(sqrt(v')/bc2_sqrt + eps))*(-step_size), m' = m*b1 + g*(1-b1),
// v' = v*b2 + (g*g)*(1-b2).
func adamwGraph(dt numerics.DType, shape []int) (*graph.Graph, error) {
	b := graph.NewBuilder("adamw_update")
	p, g, m, v := b.Input("p", dt, shape...), b.Input("g", dt, shape...), b.Input("m", dt, shape...), b.Input("v", dt, shape...)
	s := scalars(b, dt, "decay", "beta1", "one_minus_beta1", "beta2", "one_minus_beta2", "bc2_sqrt", "eps", "neg_step_size")
	op := func(name string, x, y *graph.Value) *graph.Value { return b.Op(name, nil, x, y) }
	m1 := op("add", op("mul", m, s["beta1"]), op("mul", g, s["one_minus_beta1"]))
	v1 := op("add", op("mul", v, s["beta2"]), op("mul", op("mul", g, g), s["one_minus_beta2"]))
	denom := op("add", op("div", b.Op("sqrt", nil, v1), s["bc2_sqrt"]), s["eps"])
	p1 := op("add", op("mul", p, s["decay"]), op("mul", op("div", m1, denom), s["neg_step_size"]))
	b.Output(p1, m1, v1)
	return b.Build()
}

// Step applies one SGD step to every param (in place) and advances st.
func (o SGD) Step(b backend.Backend, params, grads map[string]*tensor.Tensor, st *State) error {
	if !(o.LR >= 0) || !(o.Momentum >= 0) || !(o.WeightDecay >= 0) || (o.Nesterov && (o.Momentum <= 0 || o.Dampening != 0)) {
		return errs.New(errs.Input, "optim: SGD %+v: want lr, momentum, weight_decay >= 0; Nesterov needs momentum > 0 and no dampening", o)
	}
	names, err := check(params, grads)
	if err != nil {
		return err
	}
	type upd struct{ p, buf *tensor.Tensor }
	res := map[string]upd{}
	for _, n := range names {
		p, g := params[n], grads[n]
		dt := p.DType
		buf := st.Buffers[n+"/momentum_buffer"]
		first := o.Momentum != 0 && buf == nil
		kind := fmt.Sprintf("sgd|m=%t|n=%t|wd=%t|first=%t", o.Momentum != 0, o.Nesterov, o.WeightDecay != 0, first)
		prog, err := compiled(key(kind, p), func() (*graph.Graph, error) { return sgdGraph(o, first, dt, p.Shape) })
		if err != nil {
			return err
		}
		feed := map[string]*tensor.Tensor{"p": p, "g": g, "neg_lr": scalar(dt, -o.LR), "wd": scalar(dt, o.WeightDecay),
			"momentum": scalar(dt, o.Momentum), "one_minus_dampening": scalar(dt, 1-o.Dampening)}
		if o.Momentum != 0 && !first {
			feed["buf"] = buf
		}
		in := map[string]*tensor.Tensor{}
		for _, v := range prog.Graph.Inputs {
			in[v.Name] = feed[v.Name]
		}
		outs, err := b.Run(prog, in)
		if err != nil {
			return errs.Wrap(errs.CodeOf(err), err, "optim: SGD param %s", n)
		}
		u := upd{p: outs[0]}
		if o.Momentum != 0 {
			u.buf = outs[1]
		}
		res[n] = u
	}
	for _, n := range names {
		copy(params[n].Data, res[n].p.Data)
		if res[n].buf != nil {
			st.Buffers[n+"/momentum_buffer"] = res[n].buf
		}
	}
	st.Step++
	return nil
}

// sgdGraph: d = g (+ p*wd); with momentum buf' = d on the first step, else buf*momentum +
// d*(1-dampening); d = d + buf'*momentum (Nesterov) or buf'; p' = p + d*(-lr).
func sgdGraph(o SGD, first bool, dt numerics.DType, shape []int) (*graph.Graph, error) {
	b := graph.NewBuilder("sgd_update")
	p, g := b.Input("p", dt, shape...), b.Input("g", dt, shape...)
	op := func(name string, x, y *graph.Value) *graph.Value { return b.Op(name, nil, x, y) }
	d := g
	if o.WeightDecay != 0 {
		d = op("add", g, op("mul", p, b.Input("wd", dt)))
	}
	var buf *graph.Value
	if o.Momentum != 0 {
		mom := b.Input("momentum", dt)
		if first {
			buf = op("mul", d, b.Op("full_like", graph.Attrs{"value": graph.Float(1)}, d)) // a copy
		} else {
			buf = op("add", op("mul", b.Input("buf", dt, shape...), mom), op("mul", d, b.Input("one_minus_dampening", dt)))
		}
		if o.Nesterov {
			d = op("add", d, op("mul", buf, mom))
		} else {
			d = buf
		}
	}
	b.Output(op("add", p, op("mul", d, b.Input("neg_lr", dt))))
	if buf != nil {
		b.Output(buf)
	}
	return b.Build()
}
