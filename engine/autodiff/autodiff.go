// Package autodiff is reverse mode over Graph IR. Grad and VJP return a new graph, forward then
// backward, that the same compiler compiles, so every backend (and the golden model) runs it.
// Each op's vector-Jacobian rule sits beside its registry entry (engine/graph/vjp.go); this
// package only walks the graph, accumulates adjoints and handles dtypes.
//
// Over a mesh the program is every rank's, and the collectives are linear maps across ranks:
// the gradient is that of the sum of every rank's loss output, and each collective's
// gradient is its transpose collective (all_reduce -> all_reduce, all_gather ->
// reduce_scatter, reduce_scatter -> all_gather, all_to_all -> all_to_all with the dims
// swapped). A loss replicated on every rank therefore counts once per rank.
package autodiff

import (
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// GradPrefix names the gradient outputs: the gradient of input x is the output grad_x.
const GradPrefix = "grad_"

// CotangentPrefix names VJP's cotangent inputs: output y's cotangent is the input d_y.
const CotangentPrefix = "d_"

// Grad returns g extended with the gradient of its scalar output loss ("" means g's first
// output) with respect to each input in wrt (every float input when wrt is empty). The new
// graph's outputs are g's outputs followed by one grad_<input> per wrt input, in wrt order.
func Grad(g *graph.Graph, loss string, wrt ...string) (*graph.Graph, error) {
	out, b, err := start(g)
	if err != nil {
		return nil, err
	}
	lv := out.Outputs[0]
	if loss != "" {
		if lv = outputNamed(out, loss); lv == nil {
			return nil, errs.New(errs.Input, "autodiff: graph %s has no output %%%s", g.Name, loss)
		}
	}
	if lv.Type.Rank() != 0 || !lv.Type.DType.IsFloat() {
		return nil, errs.New(errs.Shape, "autodiff: loss %%%s is %s; Grad needs a float scalar (use VJP for other outputs)", lv.Name, lv.Type)
	}
	seed := b.Op("full_like", graph.Attrs{"value": graph.Float(1)}, lv)
	return finish(out, b, map[*graph.Value]*graph.Value{lv: seed}, wrt)
}

// VJP returns g extended with cotangent inputs d_<output> (one per output, of the output's
// type) and outputs grad_<input>: the gradient of sum_i <d_i, output_i> with respect to each
// input in wrt (every float input when wrt is empty).
func VJP(g *graph.Graph, wrt ...string) (*graph.Graph, error) {
	out, b, err := start(g)
	if err != nil {
		return nil, err
	}
	seeds := map[*graph.Value]*graph.Value{}
	for _, o := range out.Outputs {
		if !o.Type.DType.IsFloat() {
			continue
		}
		name := CotangentPrefix + o.Name
		if out.Value(name) != nil {
			return nil, errs.New(errs.Input, "autodiff: graph %s already has a value %%%s for the cotangent of %%%s", g.Name, name, o.Name)
		}
		if _, dup := seeds[o]; dup {
			continue // an output listed twice gets one cotangent
		}
		seeds[o] = b.Input(name, o.Type.DType, o.Type.Shape...)
	}
	return finish(out, b, seeds, wrt)
}

func start(g *graph.Graph) (*graph.Graph, *graph.Builder, error) {
	if g == nil {
		return nil, nil, errs.New(errs.Input, "autodiff: nil graph")
	}
	if err := graph.Verify(g); err != nil {
		return nil, nil, err
	}
	if len(g.Outputs) == 0 {
		return nil, nil, errs.New(errs.Input, "autodiff: graph %s has no outputs", g.Name)
	}
	out := g.Clone()
	return out, graph.Extend(out), nil
}

func outputNamed(g *graph.Graph, name string) *graph.Value {
	for _, o := range g.Outputs {
		if o.Name == name {
			return o
		}
	}
	return nil
}

// finish runs the backward sweep from seeds and appends the gradients of wrt as outputs.
func finish(g *graph.Graph, b *graph.Builder, seeds map[*graph.Value]*graph.Value, wrtNames []string) (*graph.Graph, error) {
	wrt, err := resolveWrt(g, wrtNames, seeds)
	if err != nil {
		return nil, err
	}
	depends := map[*graph.Value]bool{}
	for _, v := range wrt {
		depends[v] = true
	}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			if depends[in] {
				depends[n.Output] = true
			}
		}
	}
	adj := map[*graph.Value]*graph.Value{}
	for v, s := range seeds {
		adj[v] = s
	}
	nodes := slices.Clone(g.Nodes) // the builder appends to g.Nodes; walk the forward only
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		dy := adj[n.Output]
		if dy == nil || !depends[n.Output] {
			continue
		}
		need := make([]bool, len(n.Inputs))
		any := false
		for j, in := range n.Inputs {
			need[j] = depends[in] && graph.IsDifferentiable(in.Type.DType)
			any = any || need[j]
		}
		if !any {
			continue
		}
		grads, err := applyRule(b, n, dy, need)
		if err != nil {
			return nil, err
		}
		for j, gr := range grads {
			if gr == nil || !need[j] {
				continue
			}
			in := n.Inputs[j]
			if !gr.Type.Equal(in.Type) {
				return nil, errs.New(errs.Internal, "autodiff: node %%%s (%s): gradient of input %d is %s, want %s", n.Output.Name, n.Op, j, gr.Type, in.Type)
			}
			if prev := adj[in]; prev != nil {
				gr = b.Op("add", nil, prev, gr)
			}
			adj[in] = gr
		}
		if err := b.Err(); err != nil {
			return nil, errs.Wrap(errs.Internal, err, "autodiff: node %%%s (%s)", n.Output.Name, n.Op)
		}
	}
	taken := map[*graph.Value]bool{}
	for _, v := range g.Inputs {
		taken[v] = true
	}
	for _, n := range nodes {
		taken[n.Output] = true
	}
	for _, w := range wrt {
		gv := adj[w]
		if gv == nil { // the loss does not depend on w
			gv = b.Op("full_like", graph.Attrs{"value": graph.Float(0)}, w)
		}
		if !taken[gv] && g.Value(GradPrefix+w.Name) == nil {
			gv.Name = GradPrefix + w.Name
		}
		taken[gv] = true
		b.Output(gv)
	}
	res, err := b.Build()
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "autodiff: graph %s: the backward graph does not verify", g.Name)
	}
	return res, nil
}

// resolveWrt maps names to inputs; no names means every float input that is not a seed (VJP's
// cotangent inputs are not differentiated by default).
func resolveWrt(g *graph.Graph, names []string, seeds map[*graph.Value]*graph.Value) ([]*graph.Value, error) {
	isSeed := map[*graph.Value]bool{}
	for _, s := range seeds {
		isSeed[s] = true
	}
	var wrt []*graph.Value
	if len(names) == 0 {
		for _, v := range g.Inputs {
			if graph.IsDifferentiable(v.Type.DType) && !isSeed[v] {
				wrt = append(wrt, v)
			}
		}
		return wrt, nil
	}
	for _, name := range names {
		var v *graph.Value
		for _, in := range g.Inputs {
			if in.Name == name {
				v = in
			}
		}
		switch {
		case v == nil:
			return nil, errs.New(errs.Input, "autodiff: graph %s has no input %%%s to differentiate", g.Name, name)
		case !graph.IsDifferentiable(v.Type.DType):
			return nil, errs.New(errs.DType, "autodiff: input %%%s is %s: only float inputs have gradients", name, v.Type)
		case slices.Contains(wrt, v):
			return nil, errs.New(errs.Input, "autodiff: input %%%s listed twice", name)
		}
		wrt = append(wrt, v)
	}
	return wrt, nil
}

// applyRule calls n's rule, on f32 copies when the rule asks for it and n is a narrow float.
func applyRule(b *graph.Builder, n *graph.Node, dy *graph.Value, need []bool) ([]*graph.Value, error) {
	d := n.Def()
	if d == nil || d.Grad == nil {
		return nil, graph.GradError(n)
	}
	dt := n.Output.Type.DType
	if !d.Grad.Upcast || !narrow(dt) {
		return callRule(b, d.Grad, n, dy, need)
	}
	up := func(v *graph.Value) *graph.Value {
		if !narrow(v.Type.DType) {
			return v
		}
		return b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(numerics.F32)}, v)
	}
	ins := make([]*graph.Value, len(n.Inputs))
	for i, v := range n.Inputs {
		ins[i] = up(v)
	}
	wide := &graph.Node{Op: n.Op, Inputs: ins, Attrs: n.Attrs, Output: up(n.Output)}
	grads, err := callRule(b, d.Grad, wide, up(dy), need)
	if err != nil {
		return nil, err
	}
	for i, gr := range grads {
		if gr != nil && i < len(n.Inputs) && gr.Type.DType != n.Inputs[i].Type.DType {
			grads[i] = b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(n.Inputs[i].Type.DType)}, gr)
		}
	}
	return grads, nil
}

func callRule(b *graph.Builder, r *graph.GradRule, n *graph.Node, dy *graph.Value, need []bool) (grads []*graph.Value, err error) {
	grads = r.VJP(b, n, dy, need)
	if err := b.Err(); err != nil {
		return nil, errs.Wrap(errs.Unsupported, err, "autodiff: node %%%s (%s)", n.Output.Name, n.Op)
	}
	if len(grads) != len(n.Inputs) {
		return nil, errs.New(errs.Internal, "autodiff: node %%%s (%s): rule gave %d gradients for %d inputs", n.Output.Name, n.Op, len(grads), len(n.Inputs))
	}
	return grads, nil
}

func narrow(dt numerics.DType) bool { return dt.IsFloat() && dt != numerics.F32 && dt != numerics.F64 }

// Differentiable reports, for each op of the registry, whether Grad can pass through it and,
// when not, why: the table `tessera-qa gradcheck` prints.
func Differentiable(op string) (bool, string) {
	d, ok := graph.Lookup(op)
	switch {
	case !ok:
		return false, fmt.Sprintf("unknown op %q", op)
	case d.Grad != nil:
		return true, ""
	case d.NoGrad != "":
		return false, d.NoGrad
	}
	return false, "no gradient rule"
}
