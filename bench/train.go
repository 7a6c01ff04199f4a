package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/optim"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/training"
)

// TrainStepResult is one training step of the reference workload timed on the engine and,
// in the same command, in PyTorch eager on the same device.
type TrainStepResult struct {
	Model       string        `json:"model"`
	DType       string        `json:"dtype"`
	Dims        training.Dims `json:"dims"`
	Device      string        `json:"device"`
	EngineMS    float64       `json:"engine_ms"` // GradMS + OptMS
	GradMS      float64       `json:"grad_ms"`   // forward + backward (the autodiff program)
	OptMS       float64       `json:"opt_ms"`    // AdamW, one program per parameter
	GradKernels int           `json:"grad_kernels"`
	OptKernels  int           `json:"opt_kernels"`
	Torch       string        `json:"torch,omitempty"`
	TorchMS     float64       `json:"torch_ms,omitempty"`
	Ratio       float64       `json:"ratio,omitempty"` // TorchMS / EngineMS: above 1, the engine is faster
	EngineLoss  float64       `json:"engine_loss"`
	TorchLoss   float64       `json:"torch_loss,omitempty"`
	// Top lists the forward+backward program's slowest kernels (when the engine can time one
	// kernel alone), slowest first.
	Top []KernelTime `json:"top,omitempty"`
}

// KernelTime is one kernel's median time with the kernel's name, schedule kind and code path.
type KernelTime struct {
	Kernel string  `json:"kernel"`
	Kind   string  `json:"kind"`
	Path   string  `json:"path"`
	MS     float64 `json:"ms"`
}

// KernelTimer is an Engine that can time one kernel of a program alone (the CUDA backend).
type KernelTimer interface {
	TimeKernel(p *compiler.Program, in map[string]*tensor.Tensor, kernel, warmup, reps int) ([]float64, error)
}

// TimeKernel times kernel k of p with CUDA events.
func (c CUDA) TimeKernel(p *compiler.Program, in map[string]*tensor.Tensor, kernel, warmup, reps int) ([]float64, error) {
	return c.B.TimeWith(p, in, cuda.TimeOptions{Kernel: kernel, Reps: reps, Warmup: warmup})
}

// topKernels times every kernel of p alone and returns the n slowest.
func topKernels(eng Engine, p *compiler.Program, in map[string]*tensor.Tensor, reps, n int) ([]KernelTime, error) {
	kt, ok := eng.(KernelTimer)
	if !ok {
		return nil, nil
	}
	var out []KernelTime
	for k, kern := range p.Kernels {
		ts, err := kt.TimeKernel(p, in, k, 1, reps)
		if err != nil {
			return nil, err
		}
		one := &compiler.Program{Graph: p.Graph, Buffers: p.Buffers, Kernels: []*tile.Kernel{kern}, Schedules: p.Schedules[k : k+1]}
		out = append(out, KernelTime{Kernel: kern.Name, Kind: p.Schedules[k].Kind, Path: eng.Path(one), MS: median(ts)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MS > out[j].MS })
	return out[:min(n, len(out))], nil
}

// TrainStep times one step of model in dt at dims d: the engine's forward+backward program
// and its AdamW programs (medians of reps, CUDA events, inputs resident, L2 flushed), and,
// when o is not nil, torch's step (F ops, SDPA, torch.optim.AdamW(fused=True)) on the same
// parameters and batch; the first step's losses must agree within the dtype's tolerance.
func TrainStep(eng Engine, o Oracle, model string, dt numerics.DType, d training.Dims, warmup, reps int) (*TrainStepResult, error) {
	dev, err := eng.Device()
	if err != nil {
		return nil, err
	}
	m, err := training.Build(model, dt, d, d.Batch)
	if err != nil {
		return nil, err
	}
	res := &TrainStepResult{Model: model, DType: dt.String(), Dims: d, Device: dev.Name}
	gg, err := autodiff.Grad(m.Graph, "loss", m.Params...)
	if err != nil {
		return nil, err
	}
	prog, err := compiler.Compile(gg, compiler.Options{})
	if err != nil {
		return nil, err
	}
	res.GradKernels = len(prog.Kernels)
	params := m.Init(1)
	x, t := m.Batch(1, 1, 0, 1)
	feed := map[string]*tensor.Tensor{"x": x, "target": t}
	for k, v := range params {
		feed[k] = v
	}
	outs, err := eng.Run(prog, feed)
	if err != nil {
		return nil, err
	}
	res.EngineLoss = outs[0].Float64(0)
	times, err := eng.Time(prog, feed, warmup, reps)
	if err != nil {
		return nil, err
	}
	res.GradMS = median(times)
	if res.Top, err = topKernels(eng, prog, feed, max(reps/4, 3), 12); err != nil {
		return nil, err
	}
	opt := optim.DefaultAdamW()
	opt.LR = 1e-2
	progs := map[string]*compiler.Program{}
	for _, name := range m.Params {
		shape := m.Graph.Value(name).Type.Shape
		key := fmt.Sprint(shape)
		p, ok := progs[key]
		if !ok {
			g, err := opt.Graph(dt, shape)
			if err != nil {
				return nil, err
			}
			if p, err = compiler.Compile(g, compiler.Options{}); err != nil {
				return nil, err
			}
			progs[key] = p
		}
		in, err := harness.RandomInputs(p.Graph, harness.SubSeed(1, name), positive(p))
		if err != nil {
			return nil, err
		}
		ts, err := eng.Time(p, in, warmup, reps)
		if err != nil {
			return nil, err
		}
		res.OptMS += median(ts)
		res.OptKernels += len(p.Kernels)
	}
	res.EngineMS = res.GradMS + res.OptMS
	if o == nil {
		return res, nil
	}
	dir, err := os.MkdirTemp("", "tessera-train-bench-")
	if err != nil {
		return nil, errs.New(errs.Input, "bench: temporary folder: %v", err)
	}
	defer os.RemoveAll(dir)
	req := Request{Type: "run", Op: "train_step/" + model, Output: filepath.Join(dir, "loss.bin"), Warmup: warmup, Reps: reps,
		FlushBytes: 2 * dev.L2Bytes, Attrs: map[string]any{"batch": d.Batch, "seq": d.Seq, "width": d.Width, "heads": d.Heads,
			"in": d.In, "hidden": d.Hidden, "out": d.Out, "lr": opt.LR}}
	for _, name := range append(append([]string{}, m.Params...), "x", "target") {
		ft, err := writeTensor(dir, name, feed[name])
		if err != nil {
			return nil, err
		}
		req.Inputs = append(req.Inputs, ft)
	}
	rep, err := o.Run(req)
	if err != nil {
		return nil, err
	}
	if rep.Type == "error" {
		return nil, errs.New(errs.Input, "bench: torch train step: %s", rep.Error)
	}
	loss, err := readTensor(req.Output, dt, nil)
	if err != nil {
		return nil, err
	}
	res.Torch, res.TorchMS, res.TorchLoss = o.Describe(), median(rep.TimesMS), loss.Float64(0)
	res.Ratio = res.TorchMS / res.EngineMS
	tol := harness.DefaultTolerance(dt).ForReduction(x.Len())
	want := tensor.New(numerics.F64, nil)
	want.SetFloat64(0, res.TorchLoss)
	got := tensor.New(numerics.F64, nil)
	got.SetFloat64(0, res.EngineLoss)
	if r := harness.Check(got, want, tol); !r.Pass {
		return res, errs.New(errs.Nondeterministic, "bench: train step: engine loss %g, torch loss %g: %s", res.EngineLoss, res.TorchLoss, r.Reason)
	}
	return res, nil
}

// positive draws every update input from (0.5, 2): state and scalars of a real step.
func positive(p *compiler.Program) map[string]harness.Dist {
	out := map[string]harness.Dist{}
	for _, v := range p.Graph.Inputs {
		if v.Type.DType.IsFloat() {
			out[v.Name] = harness.Dist{Kind: harness.DistPositive}
		}
	}
	return out
}
