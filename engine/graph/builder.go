package graph

import (
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Builder constructs a graph in Go. Each call infers the output type at once; the first error
// sticks and is returned by Build, so call chains stay flat:
//
//	b := graph.NewBuilder("mlp")
//	x := b.Input("x", numerics.F32, 4, 8)
//	w := b.Input("w", numerics.F32, 8, 16)
//	b.Output(b.Op("relu", nil, b.Op("matmul", nil, x, w)))
//	g, err := b.Build()
type Builder struct {
	g     *Graph
	names map[string]bool
	err   error
	next  int
}

// NewBuilder starts an empty graph.
func NewBuilder(name string) *Builder {
	return &Builder{g: &Graph{Name: name}, names: map[string]bool{}}
}

// Input declares a graph input.
func (b *Builder) Input(name string, dt numerics.DType, shape ...int) *Value {
	v := &Value{Name: name, Type: Type{DType: dt, Shape: slices.Clone(shape)}}
	if b.names[name] && b.err == nil {
		b.err = fmt.Errorf("graph %s: value %%%s defined twice", b.g.Name, name)
	}
	b.names[name] = true
	b.g.Inputs = append(b.g.Inputs, v)
	return v
}

// Op appends a node with an auto-generated output name (t0, t1, ...).
func (b *Builder) Op(op string, attrs Attrs, inputs ...*Value) *Value {
	for b.names[fmt.Sprintf("t%d", b.next)] {
		b.next++
	}
	name := fmt.Sprintf("t%d", b.next)
	b.next++
	return b.Named(name, op, attrs, inputs...)
}

// Named appends a node whose output is called name.
func (b *Builder) Named(name, op string, attrs Attrs, inputs ...*Value) *Value {
	n := &Node{Op: op, Inputs: inputs, Attrs: attrs, Output: &Value{Name: name}}
	if b.err == nil {
		if b.names[name] {
			b.err = fmt.Errorf("graph %s: value %%%s defined twice", b.g.Name, name)
		} else if t, err := InferNodeIn(n, b.g.Mesh); err != nil {
			b.err = err
		} else {
			n.Output.Type = t
		}
	}
	b.names[name] = true
	b.g.Nodes = append(b.g.Nodes, n)
	return n.Output
}

// Mesh makes the graph one rank's program over m; call it before adding collective ops.
func (b *Builder) Mesh(m *mesh.Mesh) { b.g.Mesh = m }

// Output marks values as graph outputs, in order.
func (b *Builder) Output(vs ...*Value) { b.g.Outputs = append(b.g.Outputs, vs...) }

// Build verifies and returns the graph, or the first error met.
func (b *Builder) Build() (*Graph, error) {
	if b.err != nil {
		return nil, b.err
	}
	if err := Verify(b.g); err != nil {
		return nil, err
	}
	return b.g, nil
}
