package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// The shard pass: given a mesh and the layouts of a single-device graph's inputs, it
// propagates a layout to every value and inserts collectives, producing the one program every
// rank runs (SPMD) on its own blocks. Because every sharded dim must divide evenly, every rank
// infers the same local types, so one graph serves all ranks.
//
// Rules, per op kind (every rule first settles pending sums with all_reduce, except the
// movement ops, which are linear and carry a pending sum through):
//   - elementwise, cast: the output keeps the input's layout; binary ops align the operands'
//     shardings (first operand first), `chunk` a replicated operand locally, and gather an
//     operand sharded in a way the output cannot be.
//   - reduce_sum/max/mean: reduce locally, then all_reduce (sum, max, avg) over the axis of
//     every reduced dim that was sharded; equal blocks make a mean of means the mean.
//   - matmul, batch_matmul: batch and M shardings carry to the output; N sharded on B
//     (column-parallel) gives an output sharded by columns; K sharded (row-parallel, on either
//     operand, the other is chunked to match) gives a pending sum over that axis, all-reduced
//     where it is needed. Priority when two want one axis: batch, M, K, N; the loser is gathered.
//   - softmax, log_softmax, layernorm, rmsnorm over a sharded axis: the row is made whole
//     before the op. Choice: move the shard to another dim with all_to_all when one is free and
//     divisible (one exchange, the rows stay whole and the op runs unchanged), else all_gather
//     the row axis. Not a two-phase reduction (all_reduce of max, then of sum): that costs two
//     collectives per op and changes the bits against the single-device kernel, while a whole
//     row gives the same bits.
//   - attention: leading (batch, head) dims and the query dim (not when causal: the mask needs
//     absolute positions) may stay sharded, as may v's last dim; keys and the head dim are
//     gathered.
//   - transpose permutes the layout; reshape keeps shardings of the leading dims it does not
//     change and gathers the rest; slice gathers the sliced dims; concat gathers its axis.
//   - mse_loss: local mean (sum), then all_reduce avg (sum) over each sharding axis; reduction
//     none is elementwise: the output keeps the operands' layout.
//   - fft, ifft, rfft, irfft (the 2-D forms arrive desugared into two of these): the
//     transformed axis and a complex input's (re, im) dim must be whole on every rank; a
//     shard on either moves to the outermost other dim it divides with one all_to_all (else
//     it is gathered). A 2-D FFT of row blocks is so the pencil method: the local FFT along
//     the rows, one all_to_all to column blocks, the local FFT along the columns; each rank
//     runs the one-device kernel on whole lines, so the bits are the one device's. The result
//     stays in column blocks (an ifft2 after it moves them back for its first axis).
//   - conv1d, conv2d: the batch split of x and (without groups) the output-channel split of the
//     weight and bias are kept; input channels and spatial dims are gathered.
//   - graph outputs: pending sums are all-reduced; sharded dims stay sharded (DistPlan says how).

// Placement says where a tensor of the rank program lives: its layout over the mesh, the whole
// tensor's type and the block every rank holds.
type Placement struct {
	Name   string
	Layout mesh.Layout
	Global graph.Type
	Local  graph.Type
}

// DistPlan is what the shard pass decided: the mesh and the placement of the rank program's
// inputs and outputs, in graph order.
type DistPlan struct {
	Mesh    *mesh.Mesh
	Inputs  []Placement
	Outputs []Placement
}

// shard is the pass: a no-op without Options.Mesh.
func shard(s *state) error {
	if s.opts.Mesh == nil {
		return nil
	}
	g, plan, err := Shard(s.g, s.opts.Mesh, s.opts.Layouts)
	if err != nil {
		return err
	}
	s.g, s.plan = g, plan
	return nil
}

type sharder struct {
	m     *mesh.Mesh
	g     *graph.Graph // the rank program being built
	cur   map[*graph.Value]*graph.Value
	lay   map[*graph.Value]mesh.Layout // layout of each rank-program value
	names map[string]bool
	cache map[string]*graph.Value // redistributions already emitted, by value and target
}

// Shard rewrites the single-device graph g into one rank's program over m, given input layouts
// by input name (absent inputs are replicated). Errors: E_INPUT for a layout naming no input
// or a graph that already has a mesh, E_SHAPE (naming tensor, dim and axis) for a layout the
// mesh does not divide.
func Shard(g *graph.Graph, m *mesh.Mesh, layouts map[string]mesh.Layout) (*graph.Graph, *DistPlan, error) {
	if g.Mesh != nil {
		return nil, nil, errs.New(errs.Input, "graph %s already is a rank program over mesh %s; the shard pass takes a single-device graph", g.Name, g.Mesh)
	}
	names := mapKeys(layouts)
	slices.Sort(names) // the error reported is always the same one
	for _, name := range names {
		if !slices.ContainsFunc(g.Inputs, func(v *graph.Value) bool { return v.Name == name }) {
			return nil, nil, errs.New(errs.Input, "layout for %%%s: graph %s has no such input", name, g.Name)
		}
	}
	s := &sharder{m: m, g: &graph.Graph{Name: g.Name, Mesh: m}, cur: map[*graph.Value]*graph.Value{},
		lay: map[*graph.Value]mesh.Layout{}, names: map[string]bool{}, cache: map[string]*graph.Value{}}
	plan := &DistPlan{Mesh: m}
	for _, v := range g.Inputs {
		l, ok := layouts[v.Name]
		if !ok {
			l = mesh.Replicated(v.Type.Rank())
		}
		local, err := m.LocalShape(v.Name, l, v.Type.Shape)
		if err != nil {
			return nil, nil, err
		}
		nv := &graph.Value{Name: v.Name, Type: graph.Type{DType: v.Type.DType, Shape: local}}
		s.g.Inputs = append(s.g.Inputs, nv)
		s.names[v.Name] = true
		s.cur[v], s.lay[nv] = nv, l.Clone()
		plan.Inputs = append(plan.Inputs, Placement{Name: v.Name, Layout: l.Clone(), Global: v.Type, Local: nv.Type})
	}
	for _, n := range g.Nodes {
		s.names[n.Output.Name] = true
	}
	for _, n := range g.Nodes {
		if err := s.node(n); err != nil {
			return nil, nil, errs.Wrap(errs.Internal, err, "shard node %%%s (%s)", n.Output.Name, n.Op)
		}
	}
	for _, o := range g.Outputs {
		v, err := s.settled(s.cur[o])
		if err != nil {
			return nil, nil, err
		}
		s.g.Outputs = append(s.g.Outputs, v)
		plan.Outputs = append(plan.Outputs, Placement{Name: v.Name, Layout: s.lay[v].Clone(), Global: o.Type, Local: v.Type})
	}
	if err := graph.Verify(s.g); err != nil {
		return nil, nil, errs.Wrap(errs.Internal, err, "rank program of %s", g.Name)
	}
	return s.g, plan, nil
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// fresh returns an unused value name derived from base.
func (s *sharder) fresh(base string) string {
	name := base
	for i := 2; s.names[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	s.names[name] = true
	return name
}

// add appends a node to the rank program, inferring its local type over the mesh.
func (s *sharder) add(name, op string, attrs graph.Attrs, l mesh.Layout, ins ...*graph.Value) (*graph.Value, error) {
	n := &graph.Node{Op: op, Inputs: ins, Attrs: attrs, Output: &graph.Value{Name: name}}
	t, err := graph.InferNodeIn(n, s.m)
	if err != nil {
		return nil, err
	}
	n.Output.Type = t
	s.g.Nodes = append(s.g.Nodes, n)
	s.lay[n.Output] = l
	return n.Output, nil
}

// coll emits one collective on v over axis.
func (s *sharder) coll(v *graph.Value, op, axis string, attrs graph.Attrs, l mesh.Layout) (*graph.Value, error) {
	a := graph.Attrs{"axis": graph.String(axis)}
	for k, x := range attrs {
		a[k] = x
	}
	return s.add(s.fresh(v.Name+"."+op+"_"+axis), op, a, l.Clone(), v)
}

// settled returns v with its pending sums all-reduced.
func (s *sharder) settled(v *graph.Value) (*graph.Value, error) {
	l := s.lay[v].Clone()
	l.Partial = nil
	return s.redistribute(v, l)
}

// redistribute returns v in layout `to`, emitting mesh.Moves' plan as collective nodes.
func (s *sharder) redistribute(v *graph.Value, to mesh.Layout) (*graph.Value, error) {
	from := s.lay[v]
	if from.Equal(to) {
		return v, nil
	}
	key := v.Name + "|" + to.String()
	if c, ok := s.cache[key]; ok {
		return c, nil
	}
	global := s.m.GlobalShape(from, v.Type.Shape)
	if err := s.m.Check(v.Name, to, global); err != nil {
		return nil, err
	}
	moves, err := mesh.Moves(from, to)
	if err != nil {
		return nil, err
	}
	cur := v
	for _, mv := range moves {
		var attrs graph.Attrs
		switch mv.Op {
		case "all_reduce":
			attrs = graph.Attrs{"op": graph.String("sum")}
		case "all_to_all":
			attrs = graph.Attrs{"split_dim": graph.Int(int64(mv.ToDim)), "concat_dim": graph.Int(int64(mv.Dim))}
		default:
			attrs = graph.Attrs{"dim": graph.Int(int64(mv.Dim))}
		}
		if cur, err = s.coll(cur, mv.Op, mv.Axis, attrs, mv.After); err != nil {
			return nil, err
		}
	}
	s.cache[key] = cur
	return cur, nil
}

// axisPicker hands out mesh axes so that no axis shards two dims of one result.
type axisPicker map[string]bool

func (p axisPicker) take(axes ...string) string {
	for _, a := range axes {
		if a != "" && !p[a] {
			p[a] = true
			return a
		}
	}
	return ""
}

// node shards one node of the source graph.
func (s *sharder) node(n *graph.Node) error {
	ins := make([]*graph.Value, len(n.Inputs))
	for i, v := range n.Inputs {
		ins[i] = s.cur[v]
	}
	var outs *graph.Value
	var err error
	switch n.Def().Kind {
	case graph.KindCollective:
		return errs.New(errs.Unsupported, "the source graph already holds collective %s; the shard pass inserts its own", n.Op)
	case graph.KindUnary, graph.KindCast:
		outs, err = s.same(n, ins)
	case graph.KindBinary:
		outs, err = s.binary(n, ins)
	case graph.KindReduce:
		outs, err = s.reduce(n, ins)
	case graph.KindRowwise:
		outs, err = s.rowwise(n, ins)
	case graph.KindMatmul:
		if n.Op == "scaled_matmul" { // its b is [N,K] and it has two scale operands: no rule yet
			return errs.New(errs.Unsupported, "node %%%s: no sharding rule for scaled_matmul", n.Output.Name)
		}
		outs, err = s.matmul(n, ins)
	case graph.KindAttention:
		outs, err = s.attention(n, ins)
	case graph.KindAttentionGrad:
		outs, err = s.attentionGrad(n, ins)
	case graph.KindMovement:
		outs, err = s.movement(n, ins)
	case graph.KindLoss:
		outs, err = s.loss(n, ins)
	case graph.KindSpectral:
		outs, err = s.spectral(n, ins)
	case graph.KindConv:
		outs, err = s.conv(n, ins)
	default:
		return errs.New(errs.Unsupported, "no sharding rule for op kind of %s", n.Op)
	}
	if err != nil {
		return err
	}
	s.cur[n.Output] = outs
	return nil
}

// emit adds the source node with its own name and attrs over the rank inputs and checks that
// the local type it infers is the output layout's block of the global type.
func (s *sharder) emit(n *graph.Node, attrs graph.Attrs, l mesh.Layout, ins ...*graph.Value) (*graph.Value, error) {
	v, err := s.add(n.Output.Name, n.Op, attrs, l, ins...)
	if err != nil {
		return nil, err
	}
	want, err := s.m.LocalShape(n.Output.Name, l, n.Output.Type.Shape)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(want, v.Type.Shape) {
		return nil, errs.New(errs.Internal, "local %s is %s, layout %s of %s wants %v", n.Op, v.Type, l, n.Output.Type, want)
	}
	return v, nil
}

func (s *sharder) same(n *graph.Node, ins []*graph.Value) (*graph.Value, error) {
	x, err := s.settled(ins[0])
	if err != nil {
		return nil, err
	}
	return s.emit(n, n.Attrs, s.lay[x].Clone(), x)
}

func (s *sharder) binary(n *graph.Node, ins []*graph.Value) (*graph.Value, error) {
	// add and sub are linear: two operands holding the same pending sums in the same blocks
	// (no broadcast) combine their partials and keep the sum pending, so the tensor is summed
	// over the mesh once, later, instead of once per operand (a transformer's dx through q, k
	// and v: one all_reduce instead of three).
	if (n.Op == "add" || n.Op == "sub") && len(ins) == 2 {
		a, b := s.lay[ins[0]], s.lay[ins[1]]
		if len(a.Partial) > 0 && a.Equal(b) && slices.Equal(n.Inputs[0].Type.Shape, n.Inputs[1].Type.Shape) {
			return s.emit(n, n.Attrs, a.Clone(), ins[0], ins[1])
		}
	}
	out := n.Output.Type.Shape
	r := len(out)
	target := mesh.Replicated(r)
	pick := axisPicker{}
	globals := make([][]int, len(ins))
	for k, v := range ins {
		globals[k] = n.Inputs[k].Type.Shape
		off := r - len(globals[k])
		for i, a := range s.lay[v].Dims {
			if a != "" && target.Dims[i+off] == "" && globals[k][i] == out[i+off] && pick.take(a) != "" {
				target.Dims[i+off] = a
			}
		}
	}
	args := make([]*graph.Value, len(ins))
	for k, v := range ins {
		off := r - len(globals[k])
		want := mesh.Replicated(len(globals[k]))
		for i := range want.Dims {
			if globals[k][i] == out[i+off] {
				want.Dims[i] = target.Dims[i+off]
			}
		}
		var err error
		if args[k], err = s.redistribute(v, want); err != nil {
			return nil, err
		}
	}
	return s.emit(n, n.Attrs, target, args...)
}

// lossColl combines the ranks' local losses: equal blocks, so the mean of means is the mean.
// Reduction "none" is elementwise and needs none.
var lossColl = map[string]string{"mean": "avg", "sum": "sum"}

var reduceColl = map[string]string{"reduce_sum": "sum", "reduce_max": "max", "reduce_mean": "avg"}

func (s *sharder) reduce(n *graph.Node, ins []*graph.Value) (*graph.Value, error) {
	x, err := s.settled(ins[0])
	if err != nil {
		return nil, err
	}
	l := s.lay[x]
	axes, err := graph.ReduceAxes(n, l.Rank())
	if err != nil {
		return nil, err
	}
	var out mesh.Layout
	out.Dims = []string{}
	var pending []string
	for d, a := range l.Dims {
		switch {
		case !slices.Contains(axes, d):
			out.Dims = append(out.Dims, a)
		case n.BoolAttr("keepdims"):
			out.Dims = append(out.Dims, "")
			fallthrough
		default:
			if a != "" && !slices.Contains(pending, a) {
				pending = append(pending, a)
			}
		}
	}
	if len(pending) == 0 || failpoint.Enabled(failpoint.ShardReduceNotCombined) {
		return s.emit(n, n.Attrs, out, x)
	}
	local, err := s.add(s.fresh(n.Output.Name+".local"), n.Op, n.Attrs, out, x)
	if err != nil {
		return nil, err
	}
	for _, a := range pending {
		red := reduceColl[n.Op]
		if red == "avg" {
			red = failpoint.Pick(failpoint.ShardMeanCombinedAsSum, red, "sum")
		}
		if local, err = s.coll(local, "all_reduce", a, graph.Attrs{"op": graph.String(red)}, out); err != nil {
			return nil, err
		}
	}
	return local, nil
}

func (s *sharder) rowwise(n *graph.Node, ins []*graph.Value) (*graph.Value, error) {
	x, err := s.settled(ins[0])
	if err != nil {
		return nil, err
	}
	l := s.lay[x].Clone()
	global := n.Inputs[0].Type.Shape
	if len(global) == 0 { // softmax of a scalar: nothing to shard, the op runs as it is
		return s.emit(n, n.Attrs, l, x)
	}
	last := len(global) - 1
	row := last
	if n.HasAttr("axis") {
		if row, err = graph.NormAxis(int(n.IntAttr("axis")), len(global)); err != nil {
			return nil, err
		}
	}
	if a := l.Dims[row]; a != "" && !failpoint.Enabled(failpoint.ShardRowwiseShardsKept) {
		l.Dims[row] = ""
		for d := range l.Dims {
			isNorm := n.Op == "layernorm" || n.Op == "rmsnorm"
			if d != row && l.Dims[d] == "" && global[d]%s.m.Size(a) == 0 && !(isNorm && d == last) {
				l.Dims[d] = a
				break
			}
		}
		if x, err = s.redistribute(x, l); err != nil {
			return nil, err
		}
	}
	args := []*graph.Value{x}
	for _, p := range ins[1:] {
		pv, err := s.redistribute(p, mesh.Replicated(1))
		if err != nil {
			return nil, err
		}
		args = append(args, pv)
	}
	return s.emit(n, n.Attrs, l, args...)
}

func (s *sharder) spectral(n *graph.Node, ins []*graph.Value) (*graph.Value, error) {
	// A sum pending over ranks is settled first although the FFT is linear: transforming the
	// addends and summing later would round differently from the one device.
	x, err := s.settled(ins[0])
	if err != nil {
		return nil, err
	}
	global := n.Inputs[0].Type.Shape
	ax, _, err := graph.FFTAxis(n, n.Inputs[0].Type)
	if err != nil {
		return nil, err
	}
	whole := []int{ax}
	if n.Op != "rfft" { // a complex input: a rank needs both parts of each value
		whole = append(whole, len(global)-1)
	}
	l := s.lay[x].Clone()
	for _, d := range whole {
		a := l.Dims[d]
		if a == "" {
			continue
		}
		l.Dims[d] = ""
		for e := range l.Dims {
			if !slices.Contains(whole, e) && l.Dims[e] == "" && global[e]%s.m.Size(a) == 0 {
				l.Dims[e] = a
				break
			}
		}
	}
	if x, err = s.redistribute(x, l); err != nil {
		return nil, err
	}
	out := l.Clone()
	switch n.Op {
	case "rfft": // real in, complex out: a trailing (re, im) dim, whole
		out.Dims = append(out.Dims, "")
	case "irfft":
		out.Dims = out.Dims[:len(out.Dims)-1]
	}
	return s.emit(n, n.Attrs, out, x)
}

// conv keeps the batch split of x and, without groups, the output-channel split of the weight
// (and bias): each rank then convolves whole windows over whole input channels, the
// one-device sum in the one-device order. Input channels and spatial dims are gathered: a
// split of those would leave a pending sum or need halos, which no rule builds yet. With
// groups an output-channel block needs its groups' input channels, so the weight is gathered.
func (s *sharder) conv(n *graph.Node, ins []*graph.Value) (*graph.Value, error) {
	args := make([]*graph.Value, len(ins))
	for i, v := range ins {
		var err error
		if args[i], err = s.settled(v); err != nil {
			return nil, err
		}
	}
	lx, lw := s.lay[args[0]], s.lay[args[1]]
	pick := axisPicker{}
	want := []mesh.Layout{mesh.Replicated(lx.Rank()), mesh.Replicated(lw.Rank())}
	out := mesh.Replicated(n.Output.Type.Rank())
	t := pick.take(lx.Dims[0])
	want[0].Dims[0], out.Dims[0] = t, t
	if n.IntAttr("groups") <= 1 {
		t = pick.take(lw.Dims[0])
		want[1].Dims[0], out.Dims[1] = t, t
	}
	if len(args) == 3 {
		b := mesh.Replicated(1)
		b.Dims[0] = out.Dims[1]
		want = append(want, b)
	}
	for i := range args {
		var err error
		if args[i], err = s.redistribute(args[i], want[i]); err != nil {
			return nil, err
		}
	}
	return s.emit(n, n.Attrs, out, args...)
}

func (s *sharder) matmul(n *graph.Node, ins []*graph.Value) (*graph.Value, error) {
	a, err := s.settled(ins[0])
	if err != nil {
		return nil, err
	}
	b, err := s.settled(ins[1])
	if err != nil {
		return nil, err
	}
	la, lb := s.lay[a], s.lay[b]
	r := la.Rank()
	aM, aK, bK, bN := r-2, r-1, r-2, r-1
	if n.BoolAttr("transpose_a") {
		aM, aK = aK, aM
	}
	if n.BoolAttr("transpose_b") {
		bK, bN = bN, bK
	}
	pick := axisPicker{}
	tb := ""
	if r == 3 {
		tb = pick.take(la.Dims[0], lb.Dims[0])
	}
	tm := pick.take(la.Dims[aM])
	tk := pick.take(la.Dims[aK], lb.Dims[bK])
	tn := pick.take(lb.Dims[bN])
	wa, wb, out := mesh.Replicated(r), mesh.Replicated(r), mesh.Replicated(r)
	if r == 3 {
		wa.Dims[0], wb.Dims[0], out.Dims[0] = tb, tb, tb
	}
	wa.Dims[aM], wa.Dims[aK] = tm, tk
	wb.Dims[bK], wb.Dims[bN] = tk, tn
	out.Dims[r-2], out.Dims[r-1] = tm, tn
	if tk != "" && !failpoint.Enabled(failpoint.ShardMatmulKSumDropped) {
		out.Partial = []string{tk}
	}
	if a, err = s.redistribute(a, wa); err != nil {
		return nil, err
	}
	if b, err = s.redistribute(b, wb); err != nil {
		return nil, err
	}
	return s.emit(n, n.Attrs, out, a, b)
}

func (s *sharder) attention(n *graph.Node, ins []*graph.Value) (*graph.Value, error) {
	qkv := make([]*graph.Value, 3)
	ls := make([]mesh.Layout, 3)
	for i := range qkv {
		var err error
		if qkv[i], err = s.settled(ins[i]); err != nil {
			return nil, err
		}
		ls[i] = s.lay[qkv[i]]
	}
	r := ls[0].Rank()
	pick := axisPicker{}
	want := [3]mesh.Layout{mesh.Replicated(r), mesh.Replicated(r), mesh.Replicated(r)}
	out := mesh.Replicated(r)
	for d := range r - 2 {
		t := pick.take(ls[0].Dims[d], ls[1].Dims[d], ls[2].Dims[d])
		want[0].Dims[d], want[1].Dims[d], want[2].Dims[d], out.Dims[d] = t, t, t, t
	}
	if !n.BoolAttr("causal") || failpoint.Enabled(failpoint.ShardCausalQueriesSplit) {
		t := pick.take(ls[0].Dims[r-2])
		want[0].Dims[r-2], out.Dims[r-2] = t, t
	}
	t := pick.take(ls[2].Dims[r-1])
	want[2].Dims[r-1], out.Dims[r-1] = t, t
	for i := range qkv {
		var err error
		if qkv[i], err = s.redistribute(qkv[i], want[i]); err != nil {
			return nil, err
		}
	}
	return s.emit(n, n.Attrs, out, qkv...)
}

// reshapeLayout is the output layout of a reshape of a tensor in layout l (which it edits to
// the layout the input must be in first). The dims are matched in groups of equal products
// (rows -> [B, S], [H, D] -> W, ...). A block-sharded dim that splits keeps its axis on the
// outermost dim it splits into when the axis divides that dim: the blocks are then the same
// elements. Dims that merge keep the outermost one's axis when the inner ones are whole. Any
// other sharding in a group is gathered first.
func (s *sharder) reshapeLayout(l mesh.Layout, in, out []int) mesh.Layout {
	res := mesh.Layout{Dims: make([]string, len(out)), Partial: l.Partial}
	groups, ok := reshapeGroups(in, out)
	if !ok {
		for d := range l.Dims {
			l.Dims[d] = ""
		}
		return res
	}
	for _, g := range groups {
		gi, gj := g[0], g[1]
		switch {
		case len(gi) == 0 || len(gj) == 0:
		case len(gi) == 1:
			if a := l.Dims[gi[0]]; a != "" && out[gj[0]]%s.m.Size(a) == 0 {
				res.Dims[gj[0]] = a
			} else {
				l.Dims[gi[0]] = ""
			}
		case len(gj) == 1:
			for _, d := range gi[1:] {
				if !failpoint.Enabled(failpoint.ShardReshapeMergeInnerOK) {
					l.Dims[d] = ""
				}
			}
			res.Dims[gj[0]] = l.Dims[gi[0]]
		default:
			for _, d := range gi {
				l.Dims[d] = ""
			}
		}
	}
	return res
}

// reshapeGroups pairs runs of input and output dims with equal products, in order: each
// group is (input dims, output dims); a dim of size 1 may stand alone on one side. ok is false
// when the shapes hold a 0 or do not match (the caller then gathers everything).
func reshapeGroups(in, out []int) (groups [][2][]int, ok bool) {
	if slices.Contains(in, 0) || slices.Contains(out, 0) {
		return nil, false
	}
	i, j := 0, 0
	for i < len(in) || j < len(out) {
		var gi, gj []int
		pi, pj := 1, 1
		if i < len(in) {
			pi, gi, i = in[i], append(gi, i), i+1
		}
		if j < len(out) {
			pj, gj, j = out[j], append(gj, j), j+1
		}
		for pi != pj {
			switch {
			case pi < pj && i < len(in):
				pi, gi, i = pi*in[i], append(gi, i), i+1
			case pj < pi && j < len(out):
				pj, gj, j = pj*out[j], append(gj, j), j+1
			default:
				return nil, false
			}
		}
		groups = append(groups, [2][]int{gi, gj})
	}
	return groups, true
}

// attentionGrad shards attention_lse(q, k) and attention_grad(q, k, v, o, do, lse) over the
// leading (batch and head) dims, as attention's forward is: every input is cut the same way
// there and whole in the sequence and head dims (lse has no head dim of its own: it is q's
// leading dims and the query dim).
func (s *sharder) attentionGrad(n *graph.Node, ins []*graph.Value) (*graph.Value, error) {
	args := make([]*graph.Value, len(ins))
	for i, v := range ins {
		var err error
		if args[i], err = s.settled(v); err != nil {
			return nil, err
		}
	}
	r := n.Inputs[0].Type.Rank()
	lead := make([]string, r-2)
	pick := axisPicker{}
	for d := range lead {
		var cands []string
		for _, v := range args {
			cands = append(cands, s.lay[v].Dims[d])
		}
		lead[d] = pick.take(cands...)
	}
	for i, v := range args {
		want := mesh.Replicated(s.lay[v].Rank())
		copy(want.Dims, lead)
		var err error
		if args[i], err = s.redistribute(v, want); err != nil {
			return nil, err
		}
	}
	out := mesh.Replicated(n.Output.Type.Rank())
	copy(out.Dims, lead)
	return s.emit(n, n.Attrs, out, args...)
}

func (s *sharder) movement(n *graph.Node, ins []*graph.Value) (*graph.Value, error) {
	x := ins[0]
	l := s.lay[x].Clone()
	global := n.Inputs[0].Type.Shape
	switch n.Op {
	case "transpose":
		out := mesh.Layout{Dims: make([]string, len(l.Dims)), Partial: l.Partial}
		for i, p := range n.IntsAttr("perm") {
			out.Dims[i] = l.Dims[p]
		}
		return s.emit(n, n.Attrs, out, x)
	case "reshape":
		newShape := n.Output.Type.Shape
		out := s.reshapeLayout(l, global, newShape)
		x, err := s.redistribute(x, l)
		if err != nil {
			return nil, err
		}
		local, err := s.m.LocalShape(n.Output.Name, out, newShape)
		if err != nil {
			return nil, err
		}
		attrs := n.Attrs.Clone()
		attrs["shape"] = graph.Ints(toInt64s(local)...)
		return s.emit(n, attrs, out, x)
	case "slice":
		starts, ends := n.IntsAttr("starts"), n.IntsAttr("ends")
		for d := range l.Dims {
			if starts[d] != 0 || ends[d] != global[d] {
				l.Dims[d] = ""
			}
		}
		x, err := s.redistribute(x, l)
		if err != nil {
			return nil, err
		}
		local := s.lay[x].Clone()
		localEnds := slices.Clone(ends)
		for d, a := range local.Dims {
			if a != "" {
				localEnds[d] = x.Type.Shape[d]
			}
		}
		attrs := n.Attrs.Clone()
		attrs["ends"] = graph.Ints(toInt64s(localEnds)...)
		return s.emit(n, attrs, local, x)
	case "concat":
		ax, err := graph.NormAxis(int(n.IntAttr("axis")), len(global))
		if err != nil {
			return nil, err
		}
		first, err := s.settled(x)
		if err != nil {
			return nil, err
		}
		target := s.lay[first].Clone()
		target.Dims[ax] = ""
		args := make([]*graph.Value, len(ins))
		for i, v := range ins {
			if v, err = s.settled(v); err == nil {
				args[i], err = s.redistribute(v, target)
			}
			if err != nil {
				return nil, err
			}
		}
		return s.emit(n, n.Attrs, target, args...)
	}
	return nil, errs.New(errs.Unsupported, "no sharding rule for movement op %s", n.Op)
}

func (s *sharder) loss(n *graph.Node, ins []*graph.Value) (*graph.Value, error) {
	a, err := s.settled(ins[0])
	if err != nil {
		return nil, err
	}
	b, err := s.settled(ins[1])
	if err != nil {
		return nil, err
	}
	la, lb := s.lay[a], s.lay[b]
	pick := axisPicker{}
	target := mesh.Replicated(la.Rank())
	for d := range target.Dims {
		target.Dims[d] = pick.take(la.Dims[d], lb.Dims[d])
	}
	if a, err = s.redistribute(a, target); err != nil {
		return nil, err
	}
	if b, err = s.redistribute(b, target); err != nil {
		return nil, err
	}
	if n.StringAttr("reduction") == "none" { // elementwise: the output keeps the operands' layout
		return s.emit(n, n.Attrs, target, a, b)
	}
	axes := target.Axes()
	if len(axes) == 0 {
		return s.emit(n, n.Attrs, mesh.Replicated(0), a, b)
	}
	v, err := s.add(s.fresh(n.Output.Name+".local"), n.Op, n.Attrs, mesh.Replicated(0), a, b)
	for _, ax := range axes {
		if err != nil {
			return nil, err
		}
		v, err = s.coll(v, "all_reduce", ax, graph.Attrs{"op": graph.String(lossColl[n.StringAttr("reduction")])}, mesh.Replicated(0))
	}
	return v, err
}

func toInt64s(xs []int) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}

// FormatDist prints every rank's program: a header with the rank's coordinates and device,
// where each input and output block sits in the global tensor, then the program itself (the
// same text on every rank: SPMD; only the blocks differ). It is the --dump=dist view.
func FormatDist(p *DistPlan, g *graph.Graph) string {
	var b strings.Builder
	m := p.Mesh
	text := graph.Print(g)
	for r := range m.World() {
		fmt.Fprintf(&b, "// ===== rank %d of %d (%s) on %s =====\n", r, m.World(), m.CoordString(r), m.Devices[r])
		place := func(what string, ps []Placement) {
			for _, pl := range ps {
				fmt.Fprintf(&b, "// %s %%%s: %s of %s, layout %s, block %s\n", what, pl.Name, pl.Local, pl.Global, pl.Layout, blockString(m, pl, r))
			}
		}
		place("input ", p.Inputs)
		place("output", p.Outputs)
		b.WriteString(text)
	}
	return b.String()
}

// blockString renders rank r's block as index ranges: "[0:8, 16:32]".
func blockString(m *mesh.Mesh, pl Placement, r int) string {
	off := m.Offset(pl.Layout, pl.Global.Shape, r)
	parts := make([]string, len(off))
	for d := range off {
		parts[d] = fmt.Sprintf("%d:%d", off[d], off[d]+pl.Local.Shape[d])
	}
	s := "[" + strings.Join(parts, ", ") + "]"
	if len(pl.Layout.Partial) > 0 {
		s += " (addend of a sum over " + strings.Join(pl.Layout.Partial, ",") + ")"
	}
	return s
}
