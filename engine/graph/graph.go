// Package graph is Tessera's Graph IR: typed values, single-output ops with attributes, the op
// registry (name, arity, attributes, dtypes, shape rule), a builder, a verifier and the text
// format (docs/graph-format.md).
package graph

import (
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Type is a value's dtype and shape. Every dim is >= 1; a scalar has shape [].
type Type struct {
	DType numerics.DType
	Shape []int
}

func (t Type) String() string    { return tensor.TypeString(t.DType, t.Shape) }
func (t Type) Rank() int         { return len(t.Shape) }
func (t Type) NumElems() int     { return tensor.NumElems(t.Shape) }
func (t Type) Equal(u Type) bool { return t.DType == u.DType && slices.Equal(t.Shape, u.Shape) }

// Value is an SSA value: a graph input or the output of one node. Names are unique per graph.
type Value struct {
	Name string
	Type Type
}

// Node applies one op to its inputs and defines exactly one output value.
type Node struct {
	Op     string
	Inputs []*Value
	Attrs  Attrs
	Output *Value
}

// Def returns the node's op definition (nil if the op is unknown; Verify reports that).
func (n *Node) Def() *OpDef { return registry[n.Op] }

// Graph is a function: inputs, nodes in topological order, outputs. A graph with a Mesh is
// one rank's program of an SPMD run over that mesh: every rank runs the same graph on its own
// shards, and collective ops (KindCollective) name mesh axes, whose sizes their shape rules
// read. A graph without a Mesh runs on one device and cannot hold collectives.
type Graph struct {
	Name    string
	Mesh    *mesh.Mesh // nil: one device
	Inputs  []*Value
	Nodes   []*Node
	Outputs []*Value
}

// Producers maps each node-defined value to its node.
func (g *Graph) Producers() map[*Value]*Node {
	m := make(map[*Value]*Node, len(g.Nodes))
	for _, n := range g.Nodes {
		m[n.Output] = n
	}
	return m
}

// Users maps each value to the nodes that read it, in node order.
func (g *Graph) Users() map[*Value][]*Node {
	m := map[*Value][]*Node{}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			m[in] = append(m[in], n)
		}
	}
	return m
}

// Value returns the value with the given name, or nil.
func (g *Graph) Value(name string) *Value {
	for _, v := range g.Inputs {
		if v.Name == name {
			return v
		}
	}
	for _, n := range g.Nodes {
		if n.Output.Name == name {
			return n.Output
		}
	}
	return nil
}

// Clone deep-copies the graph (values, nodes, attrs).
func (g *Graph) Clone() *Graph {
	vm := map[*Value]*Value{}
	cv := func(v *Value) *Value {
		if v == nil { // a broken graph clones broken, so that Verify, not Clone, reports it
			return nil
		}
		if c, ok := vm[v]; ok {
			return c
		}
		c := &Value{Name: v.Name, Type: Type{DType: v.Type.DType, Shape: slices.Clone(v.Type.Shape)}}
		vm[v] = c
		return c
	}
	out := &Graph{Name: g.Name, Mesh: g.Mesh} // a Mesh is immutable, so sharing it is a copy
	for _, v := range g.Inputs {
		out.Inputs = append(out.Inputs, cv(v))
	}
	for _, n := range g.Nodes {
		c := &Node{Op: n.Op, Attrs: n.Attrs.Clone(), Output: cv(n.Output)}
		for _, in := range n.Inputs {
			c.Inputs = append(c.Inputs, cv(in))
		}
		out.Nodes = append(out.Nodes, c)
	}
	for _, v := range g.Outputs {
		out.Outputs = append(out.Outputs, cv(v))
	}
	return out
}
