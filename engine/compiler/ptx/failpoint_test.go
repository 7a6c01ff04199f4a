//go:build failpoints

package ptx

import (
	"strings"
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
		if !strings.HasPrefix(name, "ptx/") {
			continue // a backend fault (cuda/...): it leaves the generator alone
		}
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

// The row lowering's planted faults change the Tile IR, so the fast row kernels (built for
// the correct kernel by the same builder, tile.Rows) must refuse it and leave the faulty
// kernel to the SIMT path, where the GPU specs see the fault. A dropped eps is a constant the
// fast kernel reads off the Tile IR, so it may take the fast path and compute eps = 0 too.
func TestRowFaultsLeaveTheFastPath(t *testing.T) {
	defer failpoint.Activate() //nolint:errcheck // switching everything off
	for _, c := range []struct {
		op, fault string
		fast      bool
	}{
		{"softmax", failpoint.SoftmaxMaxInitZero, false},
		{"layernorm", failpoint.LayernormPaddingInVariance, false},
		{"layernorm", failpoint.LayernormEpsDropped, true},
	} {
		b := graph.NewBuilder("g")
		x := b.Input("x", numerics.F32, 6, 300)
		if c.op == "layernorm" {
			b.Output(b.Op(c.op, nil, x, b.Input("g", numerics.F32, 300), b.Input("b", numerics.F32, 300)))
		} else {
			b.Output(b.Op(c.op, nil, x))
		}
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		for _, on := range []bool{false, true} {
			names := []string{}
			if on {
				names = append(names, c.fault)
			}
			if err := failpoint.Activate(names...); err != nil {
				t.Fatal(err)
			}
			p, err := compiler.Compile(g, compiler.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := matchRows(p.Kernels[0]) != nil
			if want := !on || c.fast; got != want {
				t.Errorf("%s with %s on=%v: fast row kernel %v, want %v", c.op, c.fault, on, got, want)
			}
		}
	}
}
