package differential

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness/accum"
)

// namedBackend only has a name: accumBound reads nothing else.
type namedBackend string

func (b namedBackend) Name() string      { return string(b) }
func (namedBackend) Available() error    { return nil }
func (namedBackend) Device() string      { return "none" }
func (namedBackend) DeviceClass() string { return "test/none" }
func (namedBackend) Run(*compiler.Program, map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return nil, nil
}

// TestAccumBoundOnCudaOnly: a scaled_matmul case compared on cuda gets twice HopperFP8's
// bound (engine and torch._scaled_mm both accumulate on the tensor cores); on the CPU, and
// for other ops, the comparison keeps its plain tolerance.
func TestAccumBoundOnCudaOnly(t *testing.T) {
	specs := golden.SpecsFor("scaled_matmul", numerics.F8E4M3)
	cases, err := Cases(specs[2:3], 1)
	if err != nil {
		t.Fatal(err)
	}
	c := cases[0]
	got, err := Runner{Backend: namedBackend("cuda"), Target: Target{Device: "cuda"}}.accumBound(c)
	if err != nil {
		t.Fatal(err)
	}
	one, _, err := accum.ForGraph(accum.HopperFP8, c.Spec.Graph, c.Inputs)
	if err != nil || len(got) != len(one) || len(got) == 0 {
		t.Fatalf("cuda bound: %d elements, single bound %d (%v)", len(got), len(one), err)
	}
	for i := range got {
		if got[i] != 2*one[i] {
			t.Fatalf("bound[%d] = %g, want 2 x %g", i, got[i], one[i])
		}
	}
	if b, err := (Runner{Backend: namedBackend("cpu"), Target: Target{Device: "cpu"}}).accumBound(c); b != nil || err != nil {
		t.Errorf("cpu: bound %d elements, err %v; want none", len(b), err)
	}
	// The exact CPU backend against torch._scaled_mm on the GPU: the oracle's one bound (the
	// H100 run that failed without it: 930 of 1584 elements off by up to 1.6e-4).
	for _, r := range []Runner{{Backend: namedBackend("cpu"), Target: Target{Device: "cuda"}}, {Backend: namedBackend("cuda"), Target: Target{Device: "cpu"}}} {
		b, err := r.accumBound(c)
		if err != nil || len(b) != len(one) || b[0] != one[0] {
			t.Errorf("one GPU side (engine %s, oracle %s): bound %v..., want 1 x %g (%v)", r.Backend.Name(), r.Target.Device, b[:min(1, len(b))], one[0], err)
		}
	}
	mm, err := Cases(golden.SpecsFor("matmul", numerics.F32)[1:2], 1)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := (Runner{Backend: namedBackend("cuda"), Target: Target{Device: "cuda"}}).accumBound(mm[0]); b != nil || err != nil {
		t.Errorf("matmul on cuda: bound %d elements, err %v; want none", len(b), err)
	}
}
