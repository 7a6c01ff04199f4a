//go:build failpoints

package ptx

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The GPU faults must change the generated code (the GPU golden specs then catch them on the
// GPU machine; docs/mutations.md records that run).
func TestGPUFaultsChangeTheGeneratedPTX(t *testing.T) {
	b := graph.NewBuilder("g")
	b.Output(b.Op("exp", nil, b.Input("x", numerics.F32, 5, 7)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gen := func() string {
		m, err := Generate(p.Kernels[0], H100)
		if err != nil {
			t.Fatal(err)
		}
		return m.PTX
	}
	clean := gen()
	for _, name := range failpoint.GPUNames() {
		if err := failpoint.Activate(name); err != nil {
			t.Fatal(err)
		}
		if gen() == clean {
			t.Errorf("%s does not change the PTX", name)
		}
	}
	if err := failpoint.Activate(); err != nil {
		t.Fatal(err)
	}
	if gen() != clean {
		t.Error("PTX differs with every fault off")
	}
}
