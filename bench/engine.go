package bench

import (
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Engine runs and times compiled programs on the device under test.
type Engine interface {
	// Device describes the device: its name, device class and L2 size (the flush size).
	Device() (Device, error)
	Run(p *compiler.Program, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error)
	// Time returns reps per-rep milliseconds of the whole program after warmup untimed runs,
	// with the L2 flushed before every rep.
	Time(p *compiler.Program, inputs map[string]*tensor.Tensor, warmup, reps int) ([]float64, error)
	// Path names the code path of each kernel, joined by "+" ("simt-rows", "simt-stream", "wgmma").
	Path(p *compiler.Program) string
}

// Device is what the bench needs to know of the engine's device.
type Device struct {
	Name    string // "NVIDIA H100 80GB HBM3 sm_90 (132 SMs)"
	Class   string // "cuda/sm_90": the series the bench JSON rows belong to
	Driver  string
	L2Bytes int
}

// CUDA is the engine on the CUDA backend, timed with its CUDA-event timer.
type CUDA struct{ B *cuda.Backend }

// Device fails with E_NO_DEVICE when no usable GPU is there.
func (c CUDA) Device() (Device, error) {
	if err := c.B.Available(); err != nil {
		return Device{}, err
	}
	info, err := c.B.Info()
	if err != nil {
		return Device{}, err
	}
	return Device{Name: c.B.Device(), Class: c.B.DeviceClass(), Driver: c.B.Driver(), L2Bytes: info.L2Bytes}, nil
}

// Run runs p once and returns its outputs.
func (c CUDA) Run(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return c.B.Run(p, in)
}

// Time uses the backend's TimeWith (CUDA events, 2 x L2 written before every rep).
func (c CUDA) Time(p *compiler.Program, in map[string]*tensor.Tensor, warmup, reps int) ([]float64, error) {
	return c.B.TimeWith(p, in, cuda.TimeOptions{Kernel: -1, Reps: reps, Warmup: warmup})
}

// Path generates each kernel for the backend's target, as the backend does, and reads the
// path the code generator took.
func (c CUDA) Path(p *compiler.Program) string {
	t := ptx.H100
	if info, err := c.B.Info(); err == nil && info.CCMajor == 9 && info.CCMinor == 0 {
		t.ArchSuffix = "a" // what the backend targets on sm_90 (cuda.targetFor)
	}
	return programPath(p, t)
}

func programPath(p *compiler.Program, t ptx.Target) string {
	var paths []string
	for _, k := range p.Kernels {
		path := "?"
		if m, err := ptx.Generate(k, t); err == nil {
			path = m.Path
		}
		if !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	return strings.Join(paths, "+")
}
