// Package backend is the one registry of execution backends (cpu, cuda, ...). A backend runs a
// compiled Program on named inputs and returns the graph's outputs in order.
package backend

import (
	"sort"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/profile"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Backend executes Tile IR programs.
type Backend interface {
	// Name is the backend's short name: "cpu", "cuda".
	Name() string
	// Available returns nil when the backend can run here, else a coded error saying why not
	// (E_NO_DEVICE with the reason).
	Available() error
	// Device describes what runs the kernels ("cpu amd64 x2", "NVIDIA H100 80GB HBM3 sm_90").
	Device() string
	// DeviceClass is the key under which bitwise results must be identical: programs on the
	// same class give the same bits ("cpu/amd64", "cuda/sm_90").
	DeviceClass() string
	// Run checks inputs against the program's graph and executes it.
	Run(p *compiler.Program, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error)
}

// Profiler is a backend that can report a run's launches and copies to a profile.Sink. Run(p,
// in) is RunProfiled(p, in, nil); profiling must never change a result's bits.
type Profiler interface {
	RunProfiled(p *compiler.Program, inputs map[string]*tensor.Tensor, sink profile.Sink) ([]*tensor.Tensor, error)
}

// RunProfiled runs p on b, reporting to sink; a backend that cannot profile is E_UNSUPPORTED.
func RunProfiled(b Backend, p *compiler.Program, inputs map[string]*tensor.Tensor, sink profile.Sink) ([]*tensor.Tensor, error) {
	pb, ok := b.(Profiler)
	if !ok {
		return nil, errs.New(errs.Unsupported, "backend %s cannot profile", b.Name())
	}
	return pb.RunProfiled(p, inputs, sink)
}

var (
	mu       sync.Mutex
	backends = map[string]Backend{}
)

// Register adds a backend; backends register themselves from init.
func Register(b Backend) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := backends[b.Name()]; dup {
		panic("backend registered twice: " + b.Name())
	}
	backends[b.Name()] = b
}

// Get returns the named backend, or E_UNSUPPORTED when no such backend is compiled in.
func Get(name string) (Backend, error) {
	mu.Lock()
	defer mu.Unlock()
	b, ok := backends[name]
	if !ok {
		return nil, errs.New(errs.Unsupported, "unknown backend %q (have %v)", name, namesLocked())
	}
	return b, nil
}

// All returns every registered backend sorted by name, available or not.
func All() []Backend {
	mu.Lock()
	defer mu.Unlock()
	out := make([]Backend, 0, len(backends))
	for _, n := range namesLocked() {
		out = append(out, backends[n])
	}
	return out
}

func namesLocked() []string {
	n := make([]string, 0, len(backends))
	for k := range backends {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
