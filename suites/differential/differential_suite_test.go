// Package differential_test is the differential suite: every golden catalogue case on the
// engine against PyTorch (and JAX where it is installed), plus one explicit spec for each place
// where Tessera's semantics and the framework's differ (docs/differential.md).
//
// One oracle process per framework serves the whole suite (per Ginkgo process), started on
// first use. Without an interpreter that imports the framework the specs skip with the reason,
// unless the oracle was asked for explicitly ($TESSERA_QA_PYTHON for torch,
// TESSERA_QA_REQUIRE_JAX=1 for jax): then they fail.
package differential_test

import (
	"os"
	"strconv"
	"sync"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func TestDifferential(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Differential Suite")
}

// requireJAX makes a missing jax a failure instead of a skip (set it on the GPU machine).
const requireJAX = "TESSERA_QA_REQUIRE_JAX"

// seedsEnv overrides the number of input draws per catalogue spec (default 3: the golden
// inputs and two more).
const seedsEnv = "TESSERA_QA_DIFF_SEEDS"

func seeds() int {
	if n, err := strconv.Atoi(os.Getenv(seedsEnv)); err == nil && n >= 1 {
		return n
	}
	return 3
}

// lazyOracle starts one framework's oracle on first use and keeps it for the suite.
type lazyOracle struct {
	framework string
	once      sync.Once
	o         *differential.Oracle
	err       error
}

var (
	torchOracle = &lazyOracle{framework: "torch"}
	jaxOracle   = &lazyOracle{framework: "jax"}
)

func (l *lazyOracle) required() bool {
	if l.framework == "jax" {
		return os.Getenv(requireJAX) == "1"
	}
	return os.Getenv(differential.PythonEnv) != ""
}

// get returns the oracle, or skips (fails, when required) the calling spec with the reason.
func (l *lazyOracle) get() *differential.Oracle {
	l.once.Do(func() { l.o, l.err = differential.Start(differential.Config{Framework: l.framework}) })
	if l.err != nil {
		if errs.CodeOf(l.err) == errs.NoDevice && !l.required() {
			Skip(l.err.Error())
		}
		Fail(l.err.Error())
	}
	return l.o
}

// onDevice returns the oracle after checking that it can compute on device. A missing device
// skips even when the framework is required: CI requires torch, and has no GPU.
func (l *lazyOracle) onDevice(device string) *differential.Oracle {
	o := l.get()
	if !o.Hello().HasDevice(device) {
		Skip(o.Describe() + " has no " + device + " device here")
	}
	return o
}

func (l *lazyOracle) close() {
	if l.o != nil {
		l.o.Close()
	}
}

var _ = AfterSuite(func() {
	torchOracle.close()
	jaxOracle.close()
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
