package graph

import (
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// CheckInputs verifies that inputs holds exactly the graph's inputs, each with the declared
// dtype and shape and a well-formed byte length. Every runner calls it before any work.
func CheckInputs(g *Graph, inputs map[string]*tensor.Tensor) error {
	for _, v := range g.Inputs {
		t, ok := inputs[v.Name]
		if !ok || t == nil {
			return errs.New(errs.Input, "graph %s: missing input %%%s (%s)", g.Name, v.Name, v.Type)
		}
		if t.DType != v.Type.DType {
			return errs.New(errs.DType, "graph %s: input %%%s is %s, declared %s", g.Name, v.Name, t.TypeString(), v.Type)
		}
		if !slices.Equal(t.Shape, v.Type.Shape) {
			return errs.New(errs.Shape, "graph %s: input %%%s is %s, declared %s", g.Name, v.Name, t.TypeString(), v.Type)
		}
		if len(t.Data) != t.Len()*t.DType.Size() {
			return errs.New(errs.Input, "graph %s: input %%%s holds %d bytes, %s needs %d", g.Name, v.Name, len(t.Data), v.Type, t.Len()*t.DType.Size())
		}
	}
	for name := range inputs {
		found := false
		for _, v := range g.Inputs {
			found = found || v.Name == name
		}
		if !found {
			return errs.New(errs.Input, "graph %s: unexpected input %q (graph inputs: %s)", g.Name, name, inputNames(g))
		}
	}
	return nil
}

func inputNames(g *Graph) string {
	s := ""
	for i, v := range g.Inputs {
		if i > 0 {
			s += ", "
		}
		s += "%" + v.Name
	}
	return s
}
