package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// group is the set of graph nodes that become one kernel: a chain of fused elementwise nodes
// or a single node of another kind. The last node's output is the only value it stores.
type group struct {
	name  string
	nodes []*graph.Node
	sched Schedule
}

func (g *group) root() *graph.Node { return g.nodes[len(g.nodes)-1] }

// key names the work for autotune configs: ops, dtypes, shapes and layout flags.
func (g *group) key() string {
	var ops []string
	for _, n := range g.nodes {
		ops = append(ops, n.Op)
	}
	n := g.root()
	var ins []string
	for _, v := range n.Inputs {
		ins = append(ins, v.Type.String())
	}
	k := strings.Join(ops, "+") + "(" + strings.Join(ins, ",") + ")"
	if n.Def().Kind == graph.KindMatmul {
		k += fmt.Sprintf("ta=%t,tb=%t", n.BoolAttr("transpose_a"), n.BoolAttr("transpose_b"))
	}
	return k
}

func formatGroups(gs []*group) string {
	var b strings.Builder
	for i, g := range gs {
		fmt.Fprintf(&b, "group %d:", i)
		for _, n := range g.nodes {
			fmt.Fprintf(&b, " %%%s=%s", n.Output.Name, n.Op)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func isElementwise(n *graph.Node) bool {
	switch n.Def().Kind {
	case graph.KindUnary, graph.KindBinary, graph.KindCast:
		return true
	}
	return false
}

func isOutput(g *graph.Graph, v *graph.Value) bool { return slices.Contains(g.Outputs, v) }

// replaceUses points every reader of old at new.
func replaceUses(g *graph.Graph, old, new *graph.Value) {
	for _, n := range g.Nodes {
		for i, in := range n.Inputs {
			if in == old {
				n.Inputs[i] = new
			}
		}
	}
}

// canonicalize removes ops that do nothing: a cast to the same dtype, a reshape to the same
// shape, an identity transpose, a slice of everything. Outputs keep their names, so a no-op
// that produces a graph output stays (it becomes a copy kernel).
func canonicalize(s *state) error {
	for _, n := range s.g.Nodes {
		out := isOutput(s.g, n.Output)
		if (out && !failpoint.Enabled(failpoint.CanonOutputRemoved)) || graph.IsCollective(n.Op) || !isNoop(n) {
			continue
		}
		replaceUses(s.g, n.Output, n.Inputs[0])
		if out { // a matcher that forgets outputs keep their names and nodes: it redirects them too
			for i, v := range s.g.Outputs {
				if v == n.Output {
					s.g.Outputs[i] = n.Inputs[0]
				}
			}
		}
	}
	return deadCode(s)
}

func isNoop(n *graph.Node) bool {
	in := n.Inputs[0].Type
	switch n.Op {
	case "cast":
		if failpoint.Enabled(failpoint.CanonCastDTypeIgnored) {
			return slices.Equal(in.Shape, n.Output.Type.Shape)
		}
		return in.Equal(n.Output.Type)
	case "reshape":
		return in.Equal(n.Output.Type)
	case "transpose":
		for i, p := range n.IntsAttr("perm") {
			if p != i && !failpoint.Enabled(failpoint.CanonTransposePermIgnored) {
				return false
			}
		}
		return in.Equal(n.Output.Type)
	case "slice":
		return in.Equal(n.Output.Type)
	}
	return false
}

// deadCode drops nodes whose outputs nobody reads and that are not graph outputs. Collective
// nodes stay: a send nobody reads locally is read by its peer's recv.
func deadCode(s *state) error {
	live := map[*graph.Value]bool{}
	for _, v := range s.g.Outputs {
		live[v] = true
	}
	var keep []*graph.Node
	for i := len(s.g.Nodes) - 1; i >= 0; i-- {
		n := s.g.Nodes[i]
		if !live[n.Output] && !graph.IsCollective(n.Op) {
			continue
		}
		keep = append(keep, n)
		for _, in := range n.Inputs {
			live[in] = true
		}
	}
	slices.Reverse(keep)
	s.g.Nodes = keep
	return nil
}

// fuseAttention rewrites matmul(softmax(matmul(q, k, transpose_b)), v) into one attention
// node (scale 1, not causal) when the intermediates are read only by the chain. The fused
// kernel keeps scores and probabilities in the accumulator dtype instead of rounding them to
// the storage dtype, so its result is at least as accurate as the unfused graph's.
func fuseAttention(s *state) error {
	prod := s.g.Producers()
	users := s.g.Users()
	only := func(v *graph.Value, n *graph.Node) bool {
		return (onlyReader(users[v], n) || failpoint.Enabled(failpoint.AttnFuseSecondReaderIgnored)) && !isOutput(s.g, v)
	}
	for _, pv := range s.g.Nodes {
		if pv.Def().Kind != graph.KindMatmul || (pv.BoolAttr("transpose_a") && !failpoint.Enabled(failpoint.AttnFuseTransposeAUnchecked)) ||
			pv.BoolAttr("transpose_b") || !plainMatmul(pv) {
			continue
		}
		sm := prod[pv.Inputs[0]]
		if sm == nil || sm.Op != "softmax" || !only(sm.Output, pv) || (sm.HasAttrSet("accum") && !failpoint.Enabled(failpoint.AttnFuseAccumUnchecked)) {
			continue
		}
		if ax := int(sm.IntAttr("axis")); ax != -1 && ax != sm.Output.Type.Rank()-1 && !failpoint.Enabled(failpoint.AttnFuseAxisUnchecked) {
			continue
		}
		qk := prod[sm.Inputs[0]]
		if qk == nil || qk.Op != pv.Op || (!qk.BoolAttr("transpose_b") && !failpoint.Enabled(failpoint.AttnFuseTransposeBUnchecked)) ||
			qk.BoolAttr("transpose_a") || !plainMatmul(qk) || !only(qk.Output, sm) {
			continue
		}
		if !qk.Inputs[0].Type.DType.IsFloat() {
			continue
		}
		pv.Op = "attention"
		pv.Inputs = []*graph.Value{qk.Inputs[0], qk.Inputs[1], pv.Inputs[1]}
		pv.Attrs = graph.Attrs{"scale": graph.Float(1)}
	}
	return deadCode(s)
}

func plainMatmul(n *graph.Node) bool { return !n.HasAttrSet("accum") && !n.HasAttrSet("tile") }

// fuseElementwise groups nodes into kernels. An elementwise node joins the group of the
// elementwise producer of its first eligible input when that value has no other reader, is
// not a graph output and has the node's shape; the group then moves to the node's position,
// which is safe because nothing else reads the group's earlier results.
func fuseElementwise(s *state) error {
	prod := s.g.Producers()
	users := s.g.Users()
	groupOf := map[*graph.Node]*group{}
	var gs []*group
	for _, n := range s.g.Nodes {
		var joined *group
		if isElementwise(n) {
			for _, in := range n.Inputs {
				p := prod[in]
				if p == nil || !isElementwise(p) ||
					(!onlyReader(users[in], n) && !failpoint.Enabled(failpoint.FuseEltSecondReaderIgnored)) ||
					(isOutput(s.g, in) && !failpoint.Enabled(failpoint.FuseEltOutputFused)) ||
					(!slices.Equal(in.Type.Shape, n.Output.Type.Shape) && !failpoint.Enabled(failpoint.FuseEltShapeUnchecked)) ||
					groupOf[p].root() != p {
					continue
				}
				joined = groupOf[p]
				break
			}
		}
		if joined == nil {
			joined = &group{}
		} else {
			gs = slices.DeleteFunc(gs, func(g *group) bool { return g == joined })
		}
		joined.nodes = append(joined.nodes, n)
		groupOf[n] = joined
		gs = append(gs, joined)
	}
	s.groups = gs
	return nil
}

// onlyReader reports whether n is the only node reading a value (it may read it twice).
func onlyReader(readers []*graph.Node, n *graph.Node) bool {
	for _, r := range readers {
		if r != n {
			return false
		}
	}
	return len(readers) > 0
}

// reduceExtent returns (kept elements, reduced elements) of a reduce node.
func reduceExtent(n *graph.Node) (outer, inner int) {
	shape := n.Inputs[0].Type.Shape
	axes, _ := graph.ReduceAxes(n, len(shape))
	outer, inner = 1, 1
	for i, d := range shape {
		if slices.Contains(axes, i) {
			inner *= d
		} else {
			outer *= d
		}
	}
	return outer, inner
}

// rowExtent returns (rows, row length) of a row-wise node along its axis (norms: last axis).
func rowExtent(n *graph.Node) (outer, inner int) {
	shape := rowShape(n)
	ax := rowAxis(n)
	outer = 1
	for i, d := range shape {
		if i != ax {
			outer *= d // not NumElems/shape[ax]: an empty row axis would divide by 0
		}
	}
	return outer, shape[ax]
}

// rowShape is the shape a row-wise kernel walks: a scalar (softmax of a 0-d tensor, torch's
// dim 0 or -1) is one row of one element, the same single element in memory.
func rowShape(n *graph.Node) []int {
	if s := n.Inputs[0].Type.Shape; len(s) > 0 {
		return s
	}
	return []int{1}
}

func rowAxis(n *graph.Node) int {
	r := len(rowShape(n))
	if n.Op == "softmax" || n.Op == "log_softmax" {
		ax, _ := graph.NormDim(int(n.IntAttr("axis")), n.Inputs[0].Type.Rank())
		return ax
	}
	return r - 1
}
