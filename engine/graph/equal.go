package graph

import (
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
)

// Equal reports whether two graphs are structurally the same: name, inputs (name and type),
// nodes in order (op, attributes by Attr.Equal, output name and type, inputs wired by name)
// and outputs by name. Absent attributes differ from attributes set to their default.
func Equal(a, b *Graph) bool { return Diff(a, b) == "" }

// Diff describes the first structural difference between a and b, or returns "".
func Diff(a, b *Graph) string {
	if a == nil || b == nil {
		if a == b {
			return ""
		}
		return fmt.Sprintf("one graph is nil (a=%v, b=%v)", a == nil, b == nil)
	}
	if a.Name != b.Name {
		return fmt.Sprintf("graph name: %q vs %q", a.Name, b.Name)
	}
	if !mesh.SameAxes(a.Mesh, b.Mesh) {
		return fmt.Sprintf("mesh: %q vs %q", a.Mesh.String(), b.Mesh.String())
	}
	if d := diffValues("input", a.Inputs, b.Inputs, true); d != "" {
		return d
	}
	if len(a.Nodes) != len(b.Nodes) {
		return fmt.Sprintf("node count: %d vs %d", len(a.Nodes), len(b.Nodes))
	}
	for i := range a.Nodes {
		if d := diffNode(a.Nodes[i], b.Nodes[i]); d != "" {
			return fmt.Sprintf("node %d: %s", i, d)
		}
	}
	return diffValues("output", a.Outputs, b.Outputs, false)
}

func diffValues(what string, a, b []*Value, typed bool) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%s count: %d vs %d", what, len(a), len(b))
	}
	for i := range a {
		if d := diffValue(a[i], b[i], typed); d != "" {
			return fmt.Sprintf("%s %d: %s", what, i, d)
		}
	}
	return ""
}

func diffValue(a, b *Value, typed bool) string {
	if valueRef(a) != valueRef(b) {
		return fmt.Sprintf("%s vs %s", valueRef(a), valueRef(b))
	}
	if typed && a != nil && !a.Type.Equal(b.Type) {
		return fmt.Sprintf("%s has type %s vs %s", valueRef(a), a.Type, b.Type)
	}
	return ""
}

func diffNode(a, b *Node) string {
	if a == nil || b == nil {
		if a == b {
			return ""
		}
		return "one node is nil"
	}
	if a.Op != b.Op {
		return fmt.Sprintf("op %s vs %s", a.Op, b.Op)
	}
	if d := diffValue(a.Output, b.Output, true); d != "" {
		return "output " + d
	}
	if d := diffValues("input", a.Inputs, b.Inputs, false); d != "" {
		return fmt.Sprintf("%s %s: %s", a.Op, valueRef(a.Output), d)
	}
	names := a.Attrs.Names()
	if bn := b.Attrs.Names(); !slices.Equal(names, bn) {
		return fmt.Sprintf("%s %s: attribute names %v vs %v", a.Op, valueRef(a.Output), names, bn)
	}
	for _, k := range names {
		if !a.Attrs[k].Equal(b.Attrs[k]) {
			return fmt.Sprintf("%s %s: attribute %s=%s vs %s", a.Op, valueRef(a.Output), k, FormatAttr(a.Attrs[k]), FormatAttr(b.Attrs[k]))
		}
	}
	return ""
}
