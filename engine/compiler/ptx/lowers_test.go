package ptx

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Lowers must agree with the generator itself: an op it says is lowered compiles to PTX, one
// it says is not is refused with NotLowered.
func TestLowersAgreesWithTheGenerator(t *testing.T) {
	for _, name := range []string{"fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "complex_mul", "conj", "conv1d", "conv2d"} {
		d, ok := graph.Lookup(name)
		if !ok {
			t.Fatalf("no op %s", name)
		}
		in := []int{4, 6, 2}
		if name == "rfft" || name == "rfft2" {
			in = []int{4, 6}
		}
		g := &graph.Graph{Name: name}
		x := &graph.Value{Name: "x", Type: graph.Type{DType: numerics.F32, Shape: in}}
		g.Inputs = []*graph.Value{x}
		args := []*graph.Value{x}
		switch name {
		case "complex_mul":
			args = append(args, x)
		case "conv1d", "conv2d":
			x.Type.Shape = []int{1, 2, 9}
			w := &graph.Value{Name: "w", Type: graph.Type{DType: numerics.F32, Shape: []int{3, 2, 3}}}
			if name == "conv2d" {
				x.Type.Shape, w.Type.Shape = []int{1, 2, 9, 8}, []int{3, 2, 3, 3}
			}
			g.Inputs = append(g.Inputs, w)
			args = append(args, w)
		}
		n := &graph.Node{Op: name, Inputs: args, Output: &graph.Value{Name: "y"}}
		ty, err := graph.InferNode(n)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n.Output.Type = ty
		g.Nodes, g.Outputs = []*graph.Node{n}, []*graph.Value{n.Output}
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = GenerateProgram(p, H100)
		switch {
		case Lowers(d) && err != nil:
			t.Errorf("%s: Lowers says yes, the generator: %v", name, err)
		case !Lowers(d) && (err == nil || !containsNotLowered(err)):
			t.Errorf("%s: Lowers says no, the generator: %v", name, err)
		}
	}
}

func containsNotLowered(err error) bool {
	return err != nil && strings.Contains(err.Error(), NotLowered)
}
