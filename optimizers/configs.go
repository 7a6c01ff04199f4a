package optimizers

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/optim"
)

// Config is one optimizer configuration of the grid.
type Config struct {
	Name string
	Opt  optim.Optimizer
}

// DTypes are the param dtypes every configuration runs with.
var DTypes = []numerics.DType{numerics.F32, numerics.F64, numerics.BF16, numerics.F16}

// Configs is the grid: every SGD structure engine/optim compiles differently (momentum,
// dampening, Nesterov, weight decay, each on and off where torch allows it) and AdamW over
// betas crossed with weight decays (zero skips the decay multiply), the learning rate and
// epsilon varied across them.
func Configs() []Config {
	var out []Config
	add := func(o optim.Optimizer) { out = append(out, Config{Name: name(o), Opt: o}) }
	for _, o := range []optim.SGD{
		{LR: 0.1},
		{LR: 0.1, WeightDecay: 0.05},
		{LR: 0.05, Momentum: 0.9},
		{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-2},
		{LR: 0.05, Momentum: 0.9, Nesterov: true},
		{LR: 0.05, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-2},
		{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 1e-4},
		{LR: 0.2, Momentum: 0.5, Dampening: 0.5},
	} {
		add(o)
	}
	betas := [][2]float64{{0.9, 0.999}, {0.8, 0.99}, {0.95, 0.98}, {0.5, 0.9}}
	wds := []float64{0, 1e-2, 0.1}
	lrs := []float64{1e-3, 1e-2, 3e-2}
	eps := []float64{1e-8, 1e-6}
	i := 0
	for _, b := range betas {
		for _, wd := range wds {
			add(optim.AdamW{LR: lrs[i%len(lrs)], Beta1: b[0], Beta2: b[1], Eps: eps[i%len(eps)], WeightDecay: wd})
			i++
		}
	}
	return out
}

func name(o optim.Optimizer) string {
	switch o := o.(type) {
	case optim.SGD:
		return fmt.Sprintf("sgd(lr=%g,momentum=%g,dampening=%g,nesterov=%t,wd=%g)", o.LR, o.Momentum, o.Dampening, o.Nesterov, o.WeightDecay)
	case optim.AdamW:
		return fmt.Sprintf("adamw(lr=%g,betas=(%g,%g),eps=%g,wd=%g)", o.LR, o.Beta1, o.Beta2, o.Eps, o.WeightDecay)
	}
	return o.Kind()
}

// withLR is o with its learning rate set: the problems run a decaying schedule.
func withLR(o optim.Optimizer, lr float64) optim.Optimizer {
	switch o := o.(type) {
	case optim.SGD:
		o.LR = lr
		return o
	case optim.AdamW:
		o.LR = lr
		return o
	}
	panic(fmt.Sprintf("optimizers: unknown optimizer %T", o))
}

func lrOf(o optim.Optimizer) float64 {
	switch o := o.(type) {
	case optim.SGD:
		return o.LR
	case optim.AdamW:
		return o.LR
	}
	panic(fmt.Sprintf("optimizers: unknown optimizer %T", o))
}
