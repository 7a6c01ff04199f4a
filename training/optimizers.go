package training

import (
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/optim"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Optimizers names the optimizers NewOptimizer builds.
var Optimizers = []string{"adamw", "sgd"}

type stepper interface {
	Step(b backend.Backend, params, grads map[string]*tensor.Tensor, st *optim.State) error
}

type engineOpt struct {
	o  stepper
	b  backend.Backend
	st *optim.State
}

func (e *engineOpt) Step(params, grads map[string]*tensor.Tensor) error {
	return e.o.Step(e.b, params, grads, e.st)
}

func (e *engineOpt) State() (map[string]*tensor.Tensor, int) { return e.st.Tensors(), e.st.Step }

func (e *engineOpt) Restore(ts map[string]*tensor.Tensor, step int) error {
	st, err := optim.RestoreState(ts, step)
	if err == nil {
		e.st = st
	}
	return err
}

// NewOptimizer returns a factory for Config.Optimizer: "adamw" (lr, torch's other defaults)
// or "sgd" (lr, momentum 0.9), running its update kernels on b.
func NewOptimizer(name string, lr float64, b backend.Backend) (func() (Optimizer, error), error) {
	var o stepper
	switch name {
	case "adamw":
		a := optim.DefaultAdamW()
		a.LR = lr
		o = a
	case "sgd":
		o = optim.SGD{LR: lr, Momentum: 0.9}
	default:
		return nil, errs.New(errs.Input, "train: unknown optimizer %q (have %v)", name, Optimizers)
	}
	return func() (Optimizer, error) { return &engineOpt{o: o, b: b, st: optim.NewState()}, nil }, nil
}
