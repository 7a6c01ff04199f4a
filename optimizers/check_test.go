package optimizers

import (
	"os"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/backend/backendtest"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func TestEngineAgreesWithTheReference(t *testing.T) {
	start := time.Now()
	lines, err := Check(backendtest.CPU(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		t.Error(l)
	}
	t.Logf("%d configurations x %d dtypes in %v", len(Configs()), len(DTypes), time.Since(start))
}

func TestTorchAgreesWithTheReferenceAndTheEngine(t *testing.T) {
	rep, err := CheckTorch(backendtest.CPU(t), "", t.TempDir())
	if errs.CodeOf(err) == errs.NoDevice && os.Getenv(differential.PythonEnv) == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range rep.Problems {
		t.Error(l)
	}
	t.Logf("%s: %d runs", rep.Torch, rep.Runs)
}
