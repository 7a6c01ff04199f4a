package compiler

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// gemmOperands makes every (batch_)matmul operand row-major: a transposed operand becomes an
// explicit transpose node and the flag is cleared. The GPU's tensor-core GEMM kernels take
// row-major operands only (a transposed one fell to the SIMT path, about 100x slower), and
// the backward of every matmul has transposed operands. A transpose copies bits, and the
// matmul still adds its K products in increasing k order, so results are unchanged.
func gemmOperands(s *state) error {
	var out []*graph.Node
	fresh := freshNames(s.g)
	for _, n := range s.g.Nodes {
		if d := n.Def(); d != nil && d.Kind == graph.KindMatmul {
			for i, flag := range []string{"transpose_a", "transpose_b"} {
				if !n.BoolAttr(flag) {
					continue
				}
				v := n.Inputs[i]
				r := v.Type.Rank()
				perm := make([]int64, r)
				for j := range perm {
					perm[j] = int64(j)
				}
				perm[r-2], perm[r-1] = perm[r-1], perm[r-2]
				t := &graph.Node{Op: "transpose", Inputs: []*graph.Value{v}, Attrs: graph.Attrs{"perm": graph.Ints(perm...)},
					Output: &graph.Value{Name: fresh(n.Output.Name + "_" + flag[len(flag)-1:] + "T")}}
				typ, err := graph.InferNode(t)
				if err != nil {
					return fmt.Errorf("node %%%s: materializing %s: %w", n.Output.Name, flag, err)
				}
				t.Output.Type = typ
				out = append(out, t)
				attrs := n.Attrs.Clone()
				attrs[flag] = graph.Bool(false)
				n.Attrs = attrs
				n.Inputs[i] = t.Output
			}
		}
		out = append(out, n)
	}
	s.g.Nodes = out
	return nil
}

// freshNames returns a function giving value names not yet taken in g (base, base_2, ...),
// for the nodes a graph pass inserts.
func freshNames(g *graph.Graph) func(base string) string {
	taken := map[string]bool{}
	for _, v := range g.Inputs {
		taken[v.Name] = true
	}
	for _, n := range g.Nodes {
		taken[n.Output.Name] = true
	}
	return func(base string) string {
		name := base
		for i := 2; taken[name]; i++ {
			name = fmt.Sprintf("%s_%d", base, i)
		}
		taken[name] = true
		return name
	}
}

// inserter returns the function a graph pass adds a node with while rewriting n: the node
// gets a fresh value named after n's output and op, its type inferred, and is appended to
// *out; the first inference error is kept in *err for the pass to return.
func inserter(out *[]*graph.Node, fresh func(string) string, n *graph.Node, err *error) func(op string, attrs graph.Attrs, ins ...*graph.Value) *graph.Value {
	return func(op string, attrs graph.Attrs, ins ...*graph.Value) *graph.Value {
		m := &graph.Node{Op: op, Inputs: ins, Attrs: attrs, Output: &graph.Value{Name: fresh(n.Output.Name + "_" + op)}}
		t, ierr := graph.InferNode(m)
		if ierr != nil && *err == nil {
			*err = ierr
		}
		m.Output.Type = t
		*out = append(*out, m)
		return m.Output
	}
}
