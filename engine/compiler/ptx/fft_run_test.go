package ptx

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func fftRun(t *testing.T, p *compiler.Program, in map[string]*tensor.Tensor) (*tensor.Tensor, *Module) {
	return emulateFFT(t, p, in, nil)
}
