package differential

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

type tensorT = tensor.Tensor

func f32s(vs ...float64) *tensor.Tensor {
	return tensor.FromFloat64(numerics.F32, []int{len(vs)}, vs)
}

func posInf() float64 { return math.Inf(1) }

// flipBackend runs the CPU backend and flips the sign of every output's first element.
type flipBackend struct{}

func (flipBackend) Name() string        { return "flip" }
func (flipBackend) Available() error    { return nil }
func (flipBackend) Device() string      { return "cpu, sign of element 0 flipped" }
func (flipBackend) DeviceClass() string { return "test/flip" }
func (flipBackend) Run(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	cpu, err := backend.Get("cpu")
	if err != nil {
		return nil, err
	}
	outs, err := cpu.Run(p, in)
	for _, t := range outs {
		t.SetFloat64(0, -t.Float64(0))
	}
	return outs, err
}
