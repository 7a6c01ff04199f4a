package sharded

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Rule is one rule of the shard pass (engine/compiler/shard.go: an op kind, and the attribute
// values that pick a branch of it) on a graph of that one op, small enough to run under every
// legal layout of its inputs.
type Rule struct {
	Name string // op/branch: "reduce_sum/axes=1", "attention/causal"
	// Op builds the node from the inputs (declared by Inputs, in order).
	Op     func(b *graph.Builder, in []*graph.Value) *graph.Value
	Inputs [][]int
	// Sums lists, per input, the dims the op sums (or maxes) over: a layout that shards one
	// of them needs a collective over that axis (a reduction, or a gather first); a layout
	// that shards none, with no input pending a sum, needs no reducing collective.
	Sums [][]int
	K    int // the longest sum an output element depends on (the tolerance's scale)
}

// Graph is the rule's one-op graph over f32 inputs x0, x1, ...
func (r Rule) Graph() (*graph.Graph, error) {
	b := graph.NewBuilder(strings.NewReplacer("/", "_", "=", "", ",", "_", "-", "_", "[", "", "]", "").Replace(r.Name))
	var ins []*graph.Value
	for i, s := range r.Inputs {
		ins = append(ins, b.Input(fmt.Sprintf("x%d", i), numerics.F32, s...))
	}
	b.Output(r.Op(b, ins))
	return b.Build()
}

func op(name string, attrs graph.Attrs) func(*graph.Builder, []*graph.Value) *graph.Value {
	return func(b *graph.Builder, in []*graph.Value) *graph.Value { return b.Op(name, attrs, in...) }
}

// Rules is every rule of the shard pass, each branch that an attribute selects on its own.
func Rules() []Rule {
	m2 := []int{8, 12}
	c2 := []int{4, 8, 2} // complex [4, 8]
	axes := func(a ...int64) graph.Attrs { return graph.Attrs{"axes": graph.Ints(a...)} }
	keep := func(a ...int64) graph.Attrs {
		return graph.Attrs{"axes": graph.Ints(a...), "keepdims": graph.Bool(true)}
	}
	return []Rule{
		{Name: "relu", Op: op("relu", nil), Inputs: [][]int{m2}, Sums: [][]int{nil}, K: 1},
		{Name: "cast/bf16", Op: op("cast", graph.Attrs{"to": graph.DTypeAttr(numerics.BF16)}), Inputs: [][]int{m2}, Sums: [][]int{nil}, K: 1},
		{Name: "add/same-shape", Op: op("add", nil), Inputs: [][]int{m2, m2}, Sums: [][]int{nil, nil}, K: 2},
		{Name: "mul/broadcast-row", Op: op("mul", nil), Inputs: [][]int{m2, {12}}, Sums: [][]int{nil, nil}, K: 1},
		{Name: "sub/broadcast-column", Op: op("sub", nil), Inputs: [][]int{m2, {8, 1}}, Sums: [][]int{nil, nil}, K: 2},
		{Name: "reduce_sum/axes=1", Op: op("reduce_sum", axes(1)), Inputs: [][]int{m2}, Sums: [][]int{{1}}, K: 12},
		{Name: "reduce_sum/axes=0,keepdims", Op: op("reduce_sum", keep(0)), Inputs: [][]int{m2}, Sums: [][]int{{0}}, K: 8},
		{Name: "reduce_sum/axes=0,1", Op: op("reduce_sum", axes(0, 1)), Inputs: [][]int{m2}, Sums: [][]int{{0, 1}}, K: 96},
		{Name: "reduce_mean/axes=1", Op: op("reduce_mean", axes(1)), Inputs: [][]int{m2}, Sums: [][]int{{1}}, K: 12},
		{Name: "reduce_max/axes=0", Op: op("reduce_max", axes(0)), Inputs: [][]int{m2}, Sums: [][]int{{0}}, K: 8},
		{Name: "softmax/last-axis", Op: op("softmax", nil), Inputs: [][]int{m2}, Sums: [][]int{nil}, K: 12},
		{Name: "softmax/axis=0", Op: op("softmax", graph.Attrs{"axis": graph.Int(0)}), Inputs: [][]int{m2}, Sums: [][]int{nil}, K: 8},
		{Name: "log_softmax/last-axis", Op: op("log_softmax", nil), Inputs: [][]int{m2}, Sums: [][]int{nil}, K: 12},
		{Name: "layernorm", Op: op("layernorm", nil), Inputs: [][]int{m2, {12}, {12}}, Sums: [][]int{nil, nil, nil}, K: 12},
		{Name: "rmsnorm", Op: op("rmsnorm", nil), Inputs: [][]int{m2, {12}}, Sums: [][]int{nil, nil}, K: 12},
		{Name: "matmul", Op: op("matmul", nil), Inputs: [][]int{{8, 16}, {16, 12}}, Sums: [][]int{{1}, {0}}, K: 16},
		{Name: "matmul/transpose_a", Op: op("matmul", graph.Attrs{"transpose_a": graph.Bool(true)}), Inputs: [][]int{{16, 8}, {16, 12}}, Sums: [][]int{{0}, {0}}, K: 16},
		{Name: "matmul/transpose_b", Op: op("matmul", graph.Attrs{"transpose_b": graph.Bool(true)}), Inputs: [][]int{{8, 16}, {12, 16}}, Sums: [][]int{{1}, {1}}, K: 16},
		{Name: "batch_matmul", Op: op("batch_matmul", nil), Inputs: [][]int{{4, 8, 16}, {4, 16, 12}}, Sums: [][]int{{2}, {1}}, K: 16},
		{Name: "attention", Op: op("attention", nil), Inputs: [][]int{{2, 4, 8, 16}, {2, 4, 8, 16}, {2, 4, 8, 16}}, Sums: [][]int{nil, nil, nil}, K: 16},
		{Name: "attention/causal", Op: op("attention", graph.Attrs{"causal": graph.Bool(true)}), Inputs: [][]int{{2, 4, 8, 16}, {2, 4, 8, 16}, {2, 4, 8, 16}}, Sums: [][]int{nil, nil, nil}, K: 16},
		{Name: "transpose", Op: op("transpose", graph.Attrs{"perm": graph.Ints(1, 0)}), Inputs: [][]int{m2}, Sums: [][]int{nil}, K: 1},
		{Name: "reshape/split", Op: op("reshape", graph.Attrs{"shape": graph.Ints(8, 3, 4)}), Inputs: [][]int{m2}, Sums: [][]int{nil}, K: 1},
		{Name: "reshape/merge", Op: op("reshape", graph.Attrs{"shape": graph.Ints(96)}), Inputs: [][]int{m2}, Sums: [][]int{nil}, K: 1},
		{Name: "slice/inner", Op: op("slice", graph.Attrs{"starts": graph.Ints(2, 0), "ends": graph.Ints(6, 12)}), Inputs: [][]int{m2}, Sums: [][]int{nil}, K: 1},
		{Name: "concat/axis=1", Op: op("concat", graph.Attrs{"axis": graph.Int(1)}), Inputs: [][]int{m2, {8, 4}}, Sums: [][]int{nil, nil}, K: 1},
		{Name: "concat/axis=0", Op: op("concat", graph.Attrs{"axis": graph.Int(0)}), Inputs: [][]int{m2, m2}, Sums: [][]int{nil, nil}, K: 1},
		{Name: "mse_loss", Op: op("mse_loss", nil), Inputs: [][]int{m2, m2}, Sums: [][]int{{0, 1}, {0, 1}}, K: 96},
		{Name: "mse_loss/reduction=sum", Op: op("mse_loss", graph.Attrs{"reduction": graph.String("sum")}), Inputs: [][]int{m2, m2}, Sums: [][]int{{0, 1}, {0, 1}}, K: 96},
		{Name: "mse_loss/reduction=none", Op: op("mse_loss", graph.Attrs{"reduction": graph.String("none")}), Inputs: [][]int{m2, m2}, Sums: [][]int{nil, nil}, K: 1},
		{Name: "reduce_sum/axes=[]", Op: op("reduce_sum", axes()), Inputs: [][]int{m2}, Sums: [][]int{{0, 1}}, K: 96},
		{Name: "reduce_mean/axes=[],keepdims", Op: op("reduce_mean", keep()), Inputs: [][]int{m2}, Sums: [][]int{{0, 1}}, K: 96},
		// The FFTs (issue 26): the transformed axis and the (re, im) dim must be whole; the
		// 2-D forms reach the pass as two one-axis FFTs (the pencil method).
		{Name: "fft/dim=-1", Op: op("fft", nil), Inputs: [][]int{c2}, Sums: [][]int{nil}, K: 8},
		{Name: "ifft/dim=0,n=6", Op: op("ifft", graph.Attrs{"dim": graph.Int(0), "n": graph.Int(6)}), Inputs: [][]int{c2}, Sums: [][]int{nil}, K: 6},
		{Name: "rfft/dim=0", Op: op("rfft", graph.Attrs{"dim": graph.Int(0)}), Inputs: [][]int{m2}, Sums: [][]int{nil}, K: 8},
		{Name: "irfft/dim=-1", Op: op("irfft", nil), Inputs: [][]int{{4, 5, 2}}, Sums: [][]int{nil}, K: 8},
		{Name: "fft2", Op: op("fft2", nil), Inputs: [][]int{c2}, Sums: [][]int{nil}, K: 32},
		{Name: "irfft2", Op: op("irfft2", nil), Inputs: [][]int{{4, 5, 2}}, Sums: [][]int{nil}, K: 32},
		// The convs (issue 26): batch and output channels stay split, the rest is gathered.
		{Name: "conv1d/bias", Op: op("conv1d", nil), Inputs: [][]int{{4, 4, 10}, {4, 4, 3}, {4}}, Sums: [][]int{{1, 2}, {1, 2}, nil}, K: 12},
		{Name: "conv1d/groups=2,stride=2,padding=1", Op: op("conv1d", graph.Attrs{"groups": graph.Int(2), "stride": graph.Ints(2), "padding": graph.Ints(1)}),
			Inputs: [][]int{{4, 4, 9}, {4, 2, 3}}, Sums: [][]int{{1, 2}, {1, 2}}, K: 6},
		{Name: "conv2d", Op: op("conv2d", nil), Inputs: [][]int{{2, 4, 6, 6}, {4, 4, 3, 3}}, Sums: [][]int{{1, 2, 3}, {1, 2, 3}}, K: 36},
		{Name: "div/rounding_mode=floor", Op: op("div", graph.Attrs{"rounding_mode": graph.String("floor")}), Inputs: [][]int{m2, {12}}, Sums: [][]int{nil, nil}, K: 1},
	}
}

// RuleMesh is the mesh every rule runs on: two axes of two ranks, so a layout can shard two
// dims, or shard one and keep a sum pending over the other.
const RuleMesh = "a=2,b=2"

var ruleAxes = []string{"a", "b"}

// maxLayouts caps the layouts of one rule; beyond it a seeded sample is taken (attention's
// three rank-4 inputs have thousands).
const maxLayouts = 48

// Layouts lists the legal layouts of every input of r on RuleMesh, crossed: each dim
// replicated or block-sharded over an axis that divides it (each axis at most once per
// tensor), optionally a sum pending over a free axis. Capped at maxLayouts by a sample seeded
// with the rule's name, so the list is the same on every run.
func (r Rule) Layouts() []map[string]string {
	per := make([][]string, len(r.Inputs))
	for i, s := range r.Inputs {
		per[i] = tensorLayouts(s)
	}
	var all []map[string]string
	var walk func(i int, cur map[string]string)
	walk = func(i int, cur map[string]string) {
		if i == len(per) {
			all = append(all, maps(cur))
			return
		}
		for _, l := range per[i] {
			cur[fmt.Sprintf("x%d", i)] = l
			walk(i+1, cur)
		}
	}
	walk(0, map[string]string{})
	if len(all) <= maxLayouts {
		return all
	}
	var seed uint64
	for _, c := range r.Name {
		seed = seed*131 + uint64(c)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	// Keep the fully replicated layout: it must need no collective at all.
	out := all[:maxLayouts]
	out[0] = replicatedOf(r)
	return out
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func replicatedOf(r Rule) map[string]string {
	out := map[string]string{}
	for i, s := range r.Inputs {
		out[fmt.Sprintf("x%d", i)] = "[" + strings.Repeat("R,", len(s))
		out[fmt.Sprintf("x%d", i)] = strings.TrimSuffix(out[fmt.Sprintf("x%d", i)], ",") + "]"
	}
	return out
}

// tensorLayouts lists one tensor's legal layouts on RuleMesh.
func tensorLayouts(shape []int) []string {
	var out []string
	var walk func(d int, dims []string, used []string)
	walk = func(d int, dims []string, used []string) {
		if d == len(shape) {
			base := "[" + strings.Join(dims, ",") + "]"
			out = append(out, base)
			for _, a := range ruleAxes {
				if !slices.Contains(used, a) {
					out = append(out, base+"+P("+a+")")
				}
			}
			return
		}
		walk(d+1, append(slices.Clone(dims), "R"), used)
		for _, a := range ruleAxes {
			if !slices.Contains(used, a) && shape[d]%2 == 0 {
				walk(d+1, append(slices.Clone(dims), "S("+a+")"), append(slices.Clone(used), a))
			}
		}
	}
	walk(0, nil, nil)
	return out
}

// Reducing lists the rank program's collectives that combine values across ranks.
func Reducing(dp *compiler.DistProgram) []string {
	var out []string
	for _, c := range Collectives(dp) {
		if strings.HasPrefix(c, "all_reduce:") || strings.HasPrefix(c, "reduce_scatter:") {
			out = append(out, c)
		}
	}
	return out
}

// SummedAxes are the mesh axes that shard a dim the rule sums over, under layouts: the
// program must combine or gather over each of them (a collective on that axis), or an output
// element holds one rank's part of its sum. pending reports an input pending a sum.
func (r Rule) SummedAxes(layouts map[string]string) (axes []string, pending bool) {
	for i := range r.Inputs {
		l := layouts[fmt.Sprintf("x%d", i)]
		if strings.Contains(l, "+P(") {
			pending = true
		}
		dims := strings.Split(strings.Trim(strings.SplitN(l, "+", 2)[0], "[]"), ",")
		for _, d := range r.Sums[i] {
			if d < len(dims) && strings.HasPrefix(dims[d], "S(") {
				if a := strings.TrimSuffix(strings.TrimPrefix(dims[d], "S("), ")"); !slices.Contains(axes, a) {
					axes = append(axes, a)
				}
			}
		}
	}
	return axes, pending
}

// CheckRule runs r under every layout of Layouts on in-process ranks and returns one line per
// layout that fails: the assembled outputs against the graph on one device (bit for bit when
// the program only moves data and no input is pending a sum, else within the K-scaled
// tolerance), every rank against the golden model of its rank program, and the collectives
// the pass inserted against SummedAxes. n is the number of layouts run.
func CheckRule(be backend.Backend, r Rule) (problems []string, n int, err error) {
	g, err := r.Graph()
	if err != nil {
		return nil, 0, err
	}
	for i, ls := range r.Layouts() {
		c := Case{Name: fmt.Sprintf("%s %v", r.Name, ls), Graph: g, Mesh: RuleMesh, Layouts: ls, K: r.K, Seed: uint64(i + 1)}
		o, err := c.Run(be, dist.Deterministic)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", c.Name, err))
			continue
		}
		n++
		red, colls := Reducing(o.Program), Collectives(o.Program)
		summed, pending := r.SummedAxes(ls)
		for _, a := range summed {
			if !slices.ContainsFunc(colls, func(c string) bool { return strings.HasSuffix(c, ":"+a) }) {
				problems = append(problems, fmt.Sprintf("%s: a summed dim is sharded over %s, but no collective runs over %s (collectives %v)", c.Name, a, a, colls))
			}
		}
		if len(summed) == 0 && !pending && len(red) > 0 {
			problems = append(problems, fmt.Sprintf("%s: nothing to combine, but the program has %v", c.Name, red))
		}
		bitwise := len(red) == 0
		for k := range o.Single {
			if why := check(o.Whole[k], o.Single[k], c.Tolerance(o.Single[k].DType), bitwise); why != "" {
				problems = append(problems, fmt.Sprintf("%s: output %d against one device: %s", c.Name, k, why))
			}
			for rk := range o.Ranks {
				if why := check(o.Ranks[rk][k], o.Ref[rk][k], c.Tolerance(o.Single[k].DType), false); why != "" {
					problems = append(problems, fmt.Sprintf("%s: rank %d output %d against its rank program's golden model: %s", c.Name, rk, k, why))
				}
			}
		}
	}
	return problems, n, nil
}

// check is "" when got agrees with want: the same bytes when bitwise, else harness.Check
// under tol (the magnitude guard included).
func check(got, want *tensor.Tensor, tol harness.Tolerance, bitwise bool) string {
	if bitwise {
		if got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
			r := harness.Check(got, want, harness.Tolerance{})
			return "bits differ where the program only moves data: " + r.Reason
		}
		return ""
	}
	if r := harness.Check(got, want, tol); !r.Pass {
		return r.Reason
	}
	return ""
}
