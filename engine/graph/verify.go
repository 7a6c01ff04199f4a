package graph

import (
	"regexp"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// Limits that keep a hostile graph file from exhausting memory before anything runs.
const (
	MaxRank     = 8
	MaxElements = 1 << 28 // per value
	MaxNodes    = 1 << 16
)

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// ValidName reports whether s can name a graph or a value in the text format.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// Verify checks the whole graph: names, types, topological order, op rules (re-inferring every
// node and comparing with its recorded type), and outputs. Errors are coded and name the node.
func Verify(g *Graph) error {
	if !ValidName(g.Name) {
		return errs.New(errs.Input, "graph name %q is not an identifier", g.Name)
	}
	if len(g.Nodes) > MaxNodes {
		return errs.New(errs.Input, "graph %s has %d nodes, limit %d", g.Name, len(g.Nodes), MaxNodes)
	}
	defined := map[*Value]bool{}
	names := map[string]bool{}
	define := func(v *Value, what string) error {
		if v == nil {
			return errs.New(errs.Input, "%s: nil value", what)
		}
		if !ValidName(v.Name) {
			return errs.New(errs.Input, "%s: value name %q is not an identifier", what, v.Name)
		}
		if names[v.Name] {
			return errs.New(errs.Input, "%s: value %%%s defined twice", what, v.Name)
		}
		if err := CheckType(v.Type); err != nil {
			return errs.Wrap(errs.Shape, err, "%s: value %%%s", what, v.Name)
		}
		names[v.Name] = true
		defined[v] = true
		return nil
	}
	for _, v := range g.Inputs {
		if err := define(v, "input"); err != nil {
			return err
		}
	}
	for _, n := range g.Nodes {
		for i, in := range n.Inputs {
			if in == nil || !defined[in] {
				name := "<nil>"
				if in != nil {
					name = in.Name
				}
				return errs.New(errs.Input, "%s: input %d (%%%s) is not defined before use", nodeRef(n), i, name)
			}
		}
		t, err := InferNodeIn(n, g.Mesh)
		if err != nil {
			return err
		}
		if n.Output != nil && !t.Equal(n.Output.Type) && !failpoint.Enabled(failpoint.GraphDeclaredTypeUnchecked) {
			return errs.New(errs.Shape, "%s: %s infers %s but the value is declared %s", nodeRef(n), n.Op, t, n.Output.Type)
		}
		if err := define(n.Output, nodeRef(n)); err != nil {
			return err
		}
	}
	if len(g.Outputs) == 0 {
		return errs.New(errs.Input, "graph %s has no outputs", g.Name)
	}
	for i, v := range g.Outputs {
		if v == nil || !defined[v] {
			return errs.New(errs.Input, "graph %s: output %d is not a defined value", g.Name, i)
		}
	}
	return nil
}

// CheckType enforces the engine's type limits: a valid dtype, rank <= MaxRank, dims >= 0,
// and at most MaxElements elements. A dim of 0 is an empty tensor (an empty batch, a
// zero-length sequence), everyday PyTorch; the product of the other dims is still bounded so
// that strides computed from an empty shape cannot overflow.
func CheckType(t Type) error {
	if !t.DType.Valid() {
		return errs.New(errs.DType, "invalid dtype")
	}
	if len(t.Shape) > MaxRank && !failpoint.Enabled(failpoint.GraphRankBoundDropped) {
		return errs.New(errs.Shape, "rank %d exceeds %d", len(t.Shape), MaxRank)
	}
	n := 1
	for _, d := range t.Shape {
		if d < 0 {
			return errs.New(errs.Shape, "dim %d in %v: dims must be >= 0", d, t.Shape)
		}
		// Compare before multiplying so a hostile dim cannot wrap the product around. A zero
		// dim counts as 1 here: [0, 2^40] is empty but its strides are not small.
		f := max(d, 1)
		if f > MaxElements || n > MaxElements/f {
			return errs.New(errs.Shape, "shape %v exceeds %d elements", t.Shape, MaxElements)
		}
		n *= f
	}
	return nil
}
