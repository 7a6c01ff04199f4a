package bench

import (
	"os"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// FixedClock is an Engine on any backend (the CPU one in tests) whose clock reports MS for
// every rep: it exercises the pipeline (checks, table, JSON) where there is no GPU.
type FixedClock struct {
	Backend backend.Backend
	MS      float64
}

// Device is the backend's, with a 1 MiB "L2".
func (f FixedClock) Device() (Device, error) {
	if err := f.Backend.Available(); err != nil {
		return Device{}, err
	}
	return Device{Name: f.Backend.Device(), Class: f.Backend.DeviceClass(), L2Bytes: 1 << 20}, nil
}

// Run runs on the backend.
func (f FixedClock) Run(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return f.Backend.Run(p, in)
}

// Time reports MS for each rep without running anything.
func (f FixedClock) Time(_ *compiler.Program, _ map[string]*tensor.Tensor, _, reps int) ([]float64, error) {
	out := make([]float64, reps)
	for i := range out {
		out[i] = f.MS
	}
	return out, nil
}

// Path is the backend's name.
func (f FixedClock) Path(*compiler.Program) string { return f.Backend.Name() }

// RefOracle is an Oracle that computes each case with the golden model (engine/ref) from the
// request's files and reports MS per rep: it exercises the pipeline where there is no torch.
// Skew is added to every output element (a disagreeing oracle, for tests of the check).
type RefOracle struct {
	MS   float64
	Skew float64
}

func (RefOracle) Describe() string { return "engine/ref (a stand-in for torch)" }
func (RefOracle) Version() string  { return "ref" }
func (RefOracle) Close() error     { return nil }

// Run computes the request's op on its input files and writes the output file.
func (o RefOracle) Run(req Request) (Reply, error) {
	def, ok := opByName(req.Op)
	if !ok || len(req.Inputs) == 0 {
		return Reply{Type: "error", ID: req.ID, Error: "unknown op " + req.Op}, nil
	}
	dt, err := numerics.Parse(req.Inputs[0].DType)
	if err != nil {
		return Reply{}, errs.New(errs.Input, "bench: ref oracle: dtype %q", req.Inputs[0].DType)
	}
	c := Case{Op: req.Op, DType: dt, Shape: caseShapeOf(def, req.Inputs)}
	var shapes [][]int
	ins := map[string]*tensor.Tensor{}
	for i, in := range def.inputs(c.Shape) {
		if i >= len(req.Inputs) {
			return Reply{Type: "error", ID: req.ID, Error: "missing input " + in.name}, nil
		}
		t, err := readTensor(req.Inputs[i].File, def.inputDType(in, dt), req.Inputs[i].Shape)
		if err != nil {
			return Reply{}, err
		}
		ins[in.name] = t
		shapes = append(shapes, req.Inputs[i].Shape)
	}
	g, err := buildGraph(def, c, shapes)
	if err != nil {
		return Reply{Type: "error", ID: req.ID, Error: err.Error()}, nil
	}
	outs, err := ref.Run(g, ins)
	if err != nil {
		return Reply{Type: "error", ID: req.ID, Error: err.Error()}, nil
	}
	out := outs[0]
	if o.Skew != 0 {
		for i := range out.Len() {
			out.SetFloat64(i, out.Float64(i)+o.Skew)
		}
	}
	if err := os.WriteFile(req.Output, out.Data, 0o644); err != nil {
		return Reply{}, errs.New(errs.Input, "bench: ref oracle: %v", err)
	}
	times := make([]float64, req.Reps)
	for i := range times {
		times[i] = o.MS
	}
	return Reply{Type: "result", ID: req.ID, TimesMS: times, DType: out.DType.String(), Shape: out.Shape}, nil
}

// caseShapeOf recovers a case's shape from its input shapes: the first input's for every op
// of the table but those whose inputs together carry it (matmul, batch_matmul, fp8gemm,
// conv2d) or whose input has a trailing complex axis (fft_c2c).
func caseShapeOf(def opDef, in []FileTensor) []int {
	a := in[0].Shape
	switch {
	case def.name == "matmul" && len(in) > 1:
		return []int{a[0], in[1].Shape[1], a[1]}
	case def.name == "fp8gemm" && len(in) > 1: // B is [N,K]
		return []int{a[0], in[1].Shape[0], a[1]}
	case def.name == "batch_matmul" && len(in) > 1:
		return []int{a[0], a[1], in[1].Shape[2], a[2]}
	case def.name == "conv2d" && len(in) > 1: // w is [CO,C,K,K]
		return append(slices.Clone(a), in[1].Shape[0], in[1].Shape[2])
	case def.name == "fft_c2c": // x is [R,N,2]
		return a[:2]
	}
	return a
}
