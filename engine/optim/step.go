package optim

import (
	"maps"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Optimizer kinds, as State.Kind reports them.
const (
	KindSGD   = "sgd"
	KindAdamW = "adamw"
)

// Optimizer is SGD or AdamW.
type Optimizer interface {
	// Kind is KindSGD or KindAdamW.
	Kind() string
	// Step applies one update to every param, in place, with b running the kernels; see the
	// package doc for what it checks and its all-or-nothing promise.
	Step(b backend.Backend, params, grads map[string]*tensor.Tensor, st *State) error
}

var (
	_ Optimizer = SGD{}
	_ Optimizer = AdamW{}
)

// paramStep computes one param's update: the new param and the new state buffers by buffer
// name (inParam for the param). It must not modify its arguments.
type paramStep func(name string, p, g *tensor.Tensor) (map[string]*tensor.Tensor, error)

// step is the driver both optimizers share: check everything, compute every param's update in
// name order, then write params in place, replace state buffers and count the step.
func step(kind string, b backend.Backend, params, grads map[string]*tensor.Tensor, st *State, hyper error, one paramStep) error {
	switch {
	case b == nil:
		return errs.New(errs.Input, "optim: %s step without a backend", kind)
	case st == nil:
		return errs.New(errs.Input, "optim: %s step without a state (use NewState)", kind)
	case hyper != nil:
		return hyper
	case st.kind != "" && st.kind != kind:
		return errs.New(errs.Input, "optim: a %s step on %s state", kind, st.kind)
	}
	for _, name := range slices.Sorted(maps.Keys(grads)) {
		if _, ok := params[name]; !ok {
			return errs.New(errs.Input, "optim: grad %q names no param", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(st.bufs)) {
		if _, ok := params[name]; !ok {
			return errs.New(errs.Input, "optim: the state has buffers for %q, which is not a param", name)
		}
	}
	names := slices.Sorted(maps.Keys(params))
	for _, name := range names {
		if err := checkParam(name, params[name], grads, st); err != nil {
			return err
		}
	}
	news := make([]map[string]*tensor.Tensor, len(names))
	for i, name := range names {
		out, err := one(name, params[name], grads[name])
		if err != nil {
			return errs.Wrap(errs.Internal, err, "optim: %s update of param %q", kind, name)
		}
		np := out[inParam]
		if np == nil || !sameType(np, params[name]) {
			return errs.New(errs.Internal, "optim: %s update of param %q returned no %s param", kind, name, params[name].TypeString())
		}
		news[i] = out
	}
	for i, name := range names {
		for buf, t := range news[i] {
			if buf == inParam {
				copy(params[name].Data, t.Data)
				continue
			}
			st.put(name, buf, t)
			st.kind = kind
		}
	}
	st.Step++
	return nil
}

// checkParam verifies one param, its grad and its state buffers.
func checkParam(name string, p *tensor.Tensor, grads map[string]*tensor.Tensor, st *State) error {
	if err := checkTensor("param "+quote(name), p); err != nil {
		return err
	}
	if !paramDType(p.DType) {
		return errs.New(errs.DType, "optim: param %q is %s: optimizers take f64, f32, f16 or bf16 params", name, p.TypeString())
	}
	g, ok := grads[name]
	if !ok || g == nil {
		return errs.New(errs.Input, "optim: param %q has no grad", name)
	}
	if err := checkTensor("grad of param "+quote(name), g); err != nil {
		return err
	}
	if g.DType != p.DType {
		return errs.New(errs.DType, "optim: param %q is %s but its grad is %s", name, p.TypeString(), g.TypeString())
	}
	if !slices.Equal(g.Shape, p.Shape) {
		return errs.New(errs.Shape, "optim: param %q is %s but its grad is %s", name, p.TypeString(), g.TypeString())
	}
	cd := computeDType(p.DType)
	for _, buf := range slices.Sorted(maps.Keys(st.bufs[name])) {
		t := st.bufs[name][buf]
		if t.DType != cd {
			return errs.New(errs.DType, "optim: param %q is %s but its %s is %s (want %s)", name, p.TypeString(), buf, t.TypeString(), cd)
		}
		if !slices.Equal(t.Shape, p.Shape) {
			return errs.New(errs.Shape, "optim: param %q is %s but its %s is %s", name, p.TypeString(), buf, t.TypeString())
		}
	}
	return nil
}

func quote(s string) string { return `"` + s + `"` }
