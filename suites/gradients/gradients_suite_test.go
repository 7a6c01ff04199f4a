// Package gradients_test is the gradient suite (docs/autodiff.md): reverse mode
// (engine/autodiff) op by op and dtype by dtype against float64 finite differences and the
// float64 rule (gradients), against torch.autograd as an independent oracle, over a
// mesh for the collectives, its refusals, and its determinism; once on the cpu backend (CI)
// and once on cuda (the nightly GPU runners, label "gpu"), where torch computes on the GPU too.
//
// Without an interpreter that imports torch the torch specs skip with the reason, unless
// $TESSERA_QA_PYTHON names one: then they fail. Without a GPU the cuda specs skip.
package gradients_test

import (
	"os"
	"sync"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func TestGradients(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Gradients Suite")
}

// torch is one oracle process for the whole suite, started on first use.
var torch struct {
	once sync.Once
	o    *differential.Oracle
	err  error
}

// torchOn returns the torch oracle after checking that it computes on device; it skips the
// spec with the reason when torch is missing (fails when $TESSERA_QA_PYTHON asked for it) or
// has no such device (a skip even then: CI requires torch and has no GPU).
func torchOn(device string) *differential.Oracle {
	torch.once.Do(func() { torch.o, torch.err = differential.Start(differential.Config{Framework: "torch"}) })
	if torch.err != nil {
		if errs.CodeOf(torch.err) == errs.NoDevice && os.Getenv(differential.PythonEnv) == "" {
			Skip(torch.err.Error())
		}
		Fail(torch.err.Error())
	}
	if !torch.o.Hello().HasDevice(device) {
		Skip(torch.o.Describe() + " has no " + device + " device here")
	}
	return torch.o
}

var _ = AfterSuite(func() {
	if torch.o != nil {
		torch.o.Close()
	}
})

// engine returns the named engine backend, skipping the spec when it cannot run here.
func engine(name string) backend.Backend {
	b, err := backend.Get(name)
	Expect(err).NotTo(HaveOccurred())
	if err := b.Available(); err != nil {
		Skip("engine backend " + name + " unavailable: " + err.Error())
	}
	return b
}
