// Package cuda is the CUDA backend. Today it only probes for the NVIDIA driver
// (libcuda.so.1, loaded with purego so the binary still builds with CGO_ENABLED=0) and
// reports why it cannot run; PTX generation and launches arrive with the CUDA issue. It is
// registered so that every GPU spec exists everywhere and skips with this reason.
package cuda

import (
	"sync"

	"github.com/ebitengine/purego"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Backend is the CUDA backend.
type Backend struct {
	once sync.Once
	err  error
}

func init() { backend.Register(&Backend{}) }

func (*Backend) Name() string        { return "cuda" }
func (*Backend) Device() string      { return "none" }
func (*Backend) DeviceClass() string { return "cuda/none" }

// Available reports E_NO_DEVICE when no driver can be loaded, E_UNSUPPORTED when a driver
// is present but this build cannot generate GPU code yet.
func (b *Backend) Available() error {
	b.once.Do(func() {
		h, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			b.err = errs.New(errs.NoDevice, "no NVIDIA driver: cannot load libcuda.so.1 (%v)", err)
			return
		}
		_ = purego.Dlclose(h)
		b.err = errs.New(errs.Unsupported, "NVIDIA driver found, but this build has no CUDA code generator yet")
	})
	return b.err
}

// Run always fails with the reason Available gives.
func (b *Backend) Run(*compiler.Program, map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return nil, b.Available()
}
