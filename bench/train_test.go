package bench

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/training"
)

func TestTrainStepTimesTheGradProgramAndOneUpdatePerParameter(t *testing.T) {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range training.Models {
		res, err := TrainStep(FixedClock{Backend: b, MS: 1}, nil, model, numerics.F32, training.DefaultDims(model), 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		params := map[string]int{"mlp": 4, "transformer-block": 12, training.FNOModel: 8}[model]
		if res.GradMS != 1 || res.OptMS != float64(params) || res.EngineMS != 1+float64(params) {
			t.Errorf("%s: grad %v ms, opt %v ms, total %v ms; want 1, %d, %d", model, res.GradMS, res.OptMS, res.EngineMS, params, 1+params)
		}
		if res.GradKernels < 5 || res.OptKernels < params || !(res.EngineLoss > 0) {
			t.Errorf("%s: %d grad kernels, %d update kernels, loss %v", model, res.GradKernels, res.OptKernels, res.EngineLoss)
		}
	}
}
