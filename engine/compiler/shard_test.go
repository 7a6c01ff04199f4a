package compiler

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

const f32 = numerics.F32

func parseMesh(t *testing.T, s string) *mesh.Mesh {
	t.Helper()
	m, err := mesh.ParseMesh(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func layouts(t *testing.T, g *graph.Graph, kv ...string) map[string]mesh.Layout {
	t.Helper()
	out := map[string]mesh.Layout{}
	for i := 0; i < len(kv); i += 2 {
		l, err := mesh.ParseLayout(kv[i+1], g.Value(kv[i]).Type.Rank())
		if err != nil {
			t.Fatal(err)
		}
		out[kv[i]] = l
	}
	return out
}

func mlpGraph(t *testing.T) *graph.Graph {
	t.Helper()
	g, err := graph.ParseFile("../../docs/examples/mlp.tg")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// opsOf lists the rank program's ops, collectives with their axis.
func opsOf(g *graph.Graph) string {
	var out []string
	for _, n := range g.Nodes {
		s := n.Op
		if graph.IsCollective(n.Op) {
			s += ":" + n.StringAttr("axis")
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestColumnThenRowParallelMLPAllReducesOnceBeforeTheNonlinearity(t *testing.T) {
	g := mlpGraph(t)
	m := parseMesh(t, "tp=2")
	rg, plan, err := Shard(g, m, layouts(t, g, "w1", "col:tp", "w2", "row:tp"))
	if err != nil {
		t.Fatal(err)
	}
	// b1 is replicated, so each rank chunks its columns locally; the second matmul yields a
	// pending sum over tp, settled by one all_reduce before softmax.
	if got, want := opsOf(rg), "matmul chunk:tp add gelu matmul all_reduce:tp softmax cast"; got != want {
		t.Fatalf("rank program ops\n got %s\nwant %s\n%s", got, want, graph.Print(rg))
	}
	if w1 := rg.Value("w1"); w1.Type.String() != "f32[8,8]" {
		t.Fatalf("w1 local %s", w1.Type)
	}
	if plan.Outputs[0].Layout.String() != "[R,R]" || plan.Inputs[1].Layout.String() != "[R,S(tp)]" {
		t.Fatalf("plan %+v", plan)
	}
}

func TestDataParallelNeedsNoCollectiveUntilAReductionOverTheBatch(t *testing.T) {
	g := build(t, func(b *graph.Builder) {
		x := b.Input("x", f32, 8, 4)
		w := b.Input("w", f32, 4, 4)
		h := b.Op("relu", nil, b.Op("matmul", nil, x, w))
		b.Output(h, b.Op("reduce_sum", graph.Attrs{"axes": graph.Ints(0)}, h))
	})
	rg, plan, err := Shard(g, parseMesh(t, "dp=4"), layouts(t, g, "x", "[S(dp),R]"))
	if err != nil {
		t.Fatal(err)
	}
	if got := opsOf(rg); got != "matmul relu reduce_sum all_reduce:dp" {
		t.Fatalf("ops %s", got)
	}
	if plan.Outputs[0].Layout.String() != "[S(dp),R]" || plan.Outputs[1].Layout.String() != "[R]" {
		t.Fatalf("outputs %v %v", plan.Outputs[0].Layout, plan.Outputs[1].Layout)
	}
}

func TestSoftmaxOverAShardedAxisMovesTheShardWithAllToAll(t *testing.T) {
	g := build(t, func(b *graph.Builder) {
		x := b.Input("x", f32, 4, 8)
		b.Output(b.Op("softmax", nil, x))
	})
	rg, plan, err := Shard(g, parseMesh(t, "tp=2"), layouts(t, g, "x", "col:tp"))
	if err != nil {
		t.Fatal(err)
	}
	if got := opsOf(rg); got != "all_to_all:tp softmax" || plan.Outputs[0].Layout.String() != "[S(tp),R]" {
		t.Fatalf("ops %s, output %s", got, plan.Outputs[0].Layout)
	}
	// With no free dim to take the shard, the row is gathered instead.
	g1 := build(t, func(b *graph.Builder) { b.Output(b.Op("softmax", nil, b.Input("x", f32, 3, 8))) })
	rg, _, err = Shard(g1, parseMesh(t, "tp=2"), layouts(t, g1, "x", "col:tp"))
	if err != nil || opsOf(rg) != "all_gather:tp softmax" {
		t.Fatalf("ops %s, %v", opsOf(rg), err)
	}
}

func TestLayoutErrorsAreCoded(t *testing.T) {
	g := mlpGraph(t)
	_, _, err := Shard(g, parseMesh(t, "tp=3"), layouts(t, g, "w1", "col:tp"))
	if errs.CodeOf(err) != errs.Shape || !strings.Contains(err.Error(), "tensor w1: dim 1 (size 16) is not divisible by mesh axis tp (size 3)") {
		t.Fatalf("got %v", err)
	}
	_, _, err = Shard(g, parseMesh(t, "tp=2"), map[string]mesh.Layout{"nope": mesh.Replicated(1)})
	if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "%nope") {
		t.Fatalf("got %v", err)
	}
	if _, err := Compile(g, Options{Mesh: parseMesh(t, "tp=2")}); errs.CodeOf(err) != errs.Input {
		t.Fatalf("Compile with a mesh: %v", err)
	}
}

func TestCompileDistCutsTheRankProgramAtCollectives(t *testing.T) {
	g := mlpGraph(t)
	m := parseMesh(t, "dp=2,tp=2")
	opts := Options{Mesh: m, Layouts: layouts(t, g, "x", "[S(dp),R]", "w1", "col:tp", "w2", "row:tp")}
	dp, err := CompileDist(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, st := range dp.Steps {
		if st.Node != nil {
			kinds = append(kinds, st.Node.Op)
		} else {
			kinds = append(kinds, "segment")
		}
	}
	if got := strings.Join(kinds, " "); got != "segment chunk segment all_reduce segment" {
		t.Fatalf("steps %s", got)
	}
	again, err := CompileDist(g, opts)
	if err != nil || again.ScheduleHash != dp.ScheduleHash {
		t.Fatalf("hash not stable: %s vs %s (%v)", dp.ScheduleHash, again.ScheduleHash, err)
	}
	text := FormatDist(dp.Plan, dp.Graph)
	for _, want := range []string{"rank 3 of 4 (dp=1,tp=1) on cpu:3", "input  %w1: f32[8,8] of f32[8,16], layout [R,S(tp)], block [0:8, 8:16]", "mesh dp=2,tp=2"} {
		if !strings.Contains(text, want) {
			t.Fatalf("dump lacks %q:\n%s", want, text)
		}
	}
	if os.Getenv("SHOW") != "" {
		t.Log(text)
	}
}

func TestReshapeGroupsPairDimsOfEqualProducts(t *testing.T) {
	for _, c := range []struct {
		in, out []int
		want    string
	}{
		{[]int{8, 32}, []int{2, 4, 4, 8}, "[0]->[0 1] [1]->[2 3]"},
		{[]int{2, 4, 4, 8}, []int{8, 32}, "[0 1]->[0] [2 3]->[1]"},
		{[]int{4}, []int{4, 1}, "[0]->[0] []->[1]"},
		{[]int{6, 1}, []int{6}, "[0]->[0] [1]->[]"},
		{[]int{6, 4}, []int{4, 6}, "[0 1]->[0 1]"},
		{[]int{}, []int{1}, "[]->[0]"},
	} {
		groups, ok := reshapeGroups(c.in, c.out)
		var got []string
		for _, g := range groups {
			got = append(got, fmt.Sprintf("%v->%v", g[0], g[1]))
		}
		if !ok || strings.Join(got, " ") != c.want {
			t.Errorf("%v -> %v: %v %v, want %s", c.in, c.out, got, ok, c.want)
		}
	}
	for _, bad := range [][2][]int{{{0, 4}, {0}}, {{6}, {4}}, {{2, 3}, {7}}} {
		if _, ok := reshapeGroups(bad[0], bad[1]); ok {
			t.Errorf("%v -> %v accepted", bad[0], bad[1])
		}
	}
}

// A transformer's attention with head-parallel weights (wq, wk, wv by columns, wo by rows over
// tp, the batch over dp): the [rows, W] -> [B, S, H, D] reshapes keep the heads on their tp
// ranks, so the forward pass and its gradient move nothing but all_reduces (Megatron's
// pattern, one forward and one for dx), none of them an all_gather of activations.
func TestHeadParallelAttentionGathersNothing(t *testing.T) {
	const B, S, H, D = 4, 8, 4, 8
	W := H * D
	b := graph.NewBuilder("heads")
	x := b.Input("x", f32, B*S, W)
	w := map[string]*graph.Value{}
	for _, n := range []string{"wq", "wk", "wv", "wo"} {
		w[n] = b.Input(n, f32, W, W)
	}
	heads := func(v *graph.Value) *graph.Value {
		return b.Op("transpose", graph.Attrs{"perm": graph.Ints(0, 2, 1, 3)}, b.Op("reshape", graph.Attrs{"shape": graph.Ints(B, S, H, D)}, v))
	}
	mm := func(a, c *graph.Value) *graph.Value { return b.Op("matmul", nil, a, c) }
	a := b.Op("attention", graph.Attrs{"causal": graph.Bool(true)}, heads(mm(x, w["wq"])), heads(mm(x, w["wk"])), heads(mm(x, w["wv"])))
	a = b.Op("reshape", graph.Attrs{"shape": graph.Ints(B*S, int64(W))}, b.Op("transpose", graph.Attrs{"perm": graph.Ints(0, 2, 1, 3)}, a))
	b.Named("loss", "reduce_sum", graph.Attrs{"axes": graph.Ints(0, 1)}, mm(a, w["wo"]))
	b.Output(b.Graph().Value("loss"))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	gg, err := autodiff.Grad(g, "loss", "x", "wq", "wk", "wv", "wo")
	if err != nil {
		t.Fatal(err)
	}
	lay := layouts(t, gg, "x", "[S(dp),R]", "wq", "col:tp", "wk", "col:tp", "wv", "col:tp", "wo", "row:tp")
	for name, gr := range map[string]*graph.Graph{"forward": g, "forward and gradient": gg} {
		rg, _, err := Shard(gr, parseMesh(t, "dp=2,tp=2"), lay)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ops := opsOf(rg)
		if strings.Contains(ops, "all_gather") || strings.Contains(ops, "all_to_all") {
			t.Errorf("%s moves activations: %s", name, ops)
		}
		if !strings.Contains(ops, "attention") || !strings.Contains(ops, "all_reduce:tp") {
			t.Errorf("%s: %s", name, ops)
		}
		// Forward: after wo. Gradient: dA's sum is pending until it enters attention's backward,
		// and dx sums its three partials (through q, k and v) before one all_reduce.
		if got, want := strings.Count(ops, "all_reduce:tp"), map[string]int{"forward": 1, "forward and gradient": 2}[name]; got != want {
			t.Errorf("%s: %d all_reduce over tp, want %d: %s", name, got, want, ops)
		}
	}
}

// Only sums pending over the same axes add before their all_reduce: a bias added to a
// row-parallel matmul's pending sum must wait for the sum (added to every partial, it would
// count tp times), while two pending sums add first and are summed once.
func TestPendingSumsAddOnlyToPendingSums(t *testing.T) {
	b := graph.NewBuilder("pending")
	a, c := b.Input("a", f32, 8, 16), b.Input("c", f32, 8, 16)
	w, v := b.Input("w", f32, 16, 4), b.Input("v", f32, 16, 4)
	bias := b.Input("bias", f32, 4)
	both := b.Op("add", nil, b.Op("matmul", nil, a, w), b.Op("matmul", nil, c, v))
	b.Output(b.Op("add", nil, both, bias))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rg, _, err := Shard(g, parseMesh(t, "tp=2"), layouts(t, g, "a", "[R,S(tp)]", "c", "[R,S(tp)]", "w", "row:tp", "v", "row:tp"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := opsOf(rg), "matmul matmul add all_reduce:tp add"; got != want {
		t.Errorf("ops %q, want %q", got, want)
	}
}

// mse_loss's reductions over a batch split on dp (issue 21): the mean all-reduces with avg,
// the sum with sum, and none stays sharded like its operands, with no collective.
func TestMSELossReductionsOverDataParallel(t *testing.T) {
	for red, want := range map[string]string{"mean": "mse_loss all_reduce:dp avg", "sum": "mse_loss all_reduce:dp sum", "none": "mse_loss"} {
		g := build(t, func(b *graph.Builder) {
			b.Output(b.Op("mse_loss", graph.Attrs{"reduction": graph.String(red)}, b.Input("a", f32, 8, 4), b.Input("y", f32, 8, 4)))
		})
		rg, plan, err := Shard(g, parseMesh(t, "dp=4"), layouts(t, g, "a", "[S(dp),R]", "y", "[S(dp),R]"))
		if err != nil {
			t.Fatalf("%s: %v", red, err)
		}
		got := opsOf(rg)
		for _, n := range rg.Nodes {
			if n.Op == "all_reduce" {
				got += " " + n.StringAttr("op")
			}
		}
		if got != want {
			t.Errorf("reduction %s: ops %q, want %q", red, got, want)
		}
		if red == "none" && plan.Outputs[0].Layout.String() != "[S(dp),R]" {
			t.Errorf("reduction none: output layout %s", plan.Outputs[0].Layout)
		}
	}
}

// A reduction written axes=[] folds every axis, the sharded one included (issue 21).
func TestEmptyAxesReduceAllReducesOverTheShardedAxis(t *testing.T) {
	g := build(t, func(b *graph.Builder) {
		b.Output(b.Op("reduce_sum", graph.Attrs{"axes": graph.Ints(), "keepdims": graph.Bool(true)}, b.Input("x", f32, 8, 4)))
	})
	rg, plan, err := Shard(g, parseMesh(t, "dp=4"), layouts(t, g, "x", "[S(dp),R]"))
	if err != nil {
		t.Fatal(err)
	}
	if got := opsOf(rg); got != "reduce_sum all_reduce:dp" {
		t.Fatalf("ops %s", got)
	}
	if plan.Outputs[0].Global.String() != "f32[1,1]" || plan.Outputs[0].Layout.String() != "[R,R]" {
		t.Fatalf("output %s %s", plan.Outputs[0].Global, plan.Outputs[0].Layout)
	}
}

// The one-axis FFTs need whole lines and whole (re, im) pairs: a shard on the transformed
// axis or on the complex dim moves to the outermost other dim it divides (rfft's output gains
// a whole complex dim, irfft's loses it), else it is gathered.
func TestFFTsMoveTheShardOffTheTransformedAxisAndTheComplexDim(t *testing.T) {
	for _, c := range []struct {
		op      string
		shape   []int
		attrs   graph.Attrs
		layout  string
		ops     string
		outLays string
	}{
		{"fft", []int{4, 8, 2}, nil, "[R,S(sp),R]", "all_to_all:sp fft", "[S(sp),R,R]"},
		{"fft", []int{4, 8, 2}, nil, "[R,R,S(sp)]", "all_to_all:sp fft", "[S(sp),R,R]"},
		{"fft", []int{4, 8, 2}, graph.Attrs{"dim": graph.Int(0)}, "[R,S(sp),R]", "fft", "[R,S(sp),R]"},
		{"rfft", []int{4, 8}, graph.Attrs{"dim": graph.Int(0)}, "[S(sp),R]", "all_to_all:sp rfft", "[R,S(sp),R]"},
		{"irfft", []int{4, 6, 2}, nil, "[R,S(sp),R]", "all_to_all:sp irfft", "[S(sp),R]"},
		{"fft", []int{3, 8, 2}, nil, "[R,S(sp),R]", "all_gather:sp fft", "[R,R,R]"},
	} {
		g := build(t, func(b *graph.Builder) { b.Output(b.Op(c.op, c.attrs, b.Input("x", f32, c.shape...))) })
		rg, plan, err := Shard(g, parseMesh(t, "sp=2"), layouts(t, g, "x", c.layout))
		if err != nil {
			t.Fatalf("%s %v on %s: %v", c.op, c.shape, c.layout, err)
		}
		if got := opsOf(rg); got != c.ops || plan.Outputs[0].Layout.String() != c.outLays {
			t.Errorf("%s %v on %s: ops %s, output %s; want %s, %s", c.op, c.shape, c.layout, got, plan.Outputs[0].Layout, c.ops, c.outLays)
		}
	}
}

// A one-axis FFT keeps the shardings of the other dims (no collective for a batch or channel
// split, as the fno model's tp layout needs) and moves a shard off its transform axis; rfft
// adds and irfft drops the (re, im) dim.
func TestFFTKeepsOtherDimsShardedAndMovesItsAxisShard(t *testing.T) {
	g := build(t, func(b *graph.Builder) {
		x := b.Input("x", f32, 4, 6, 8)
		y := b.Op("rfft", graph.Attrs{"dim": graph.Int(1)}, x) // over the 6
		b.Output(b.Op("irfft", graph.Attrs{"dim": graph.Int(1), "n": graph.Int(6)}, b.Op("fft", graph.Attrs{"dim": graph.Int(-1)}, y)))
	})
	rg, plan, err := Shard(g, parseMesh(t, "dp=2,tp=2"), layouts(t, g, "x", "[S(dp),R,S(tp)]"))
	if err != nil {
		t.Fatal(err)
	}
	// rfft over dim 1 keeps dp and tp; fft over the last logical dim (the 8, on tp) moves tp to
	// dim 1 and irfft over dim 1 moves it back.
	if got := opsOf(rg); got != "rfft all_to_all:tp fft all_to_all:tp irfft" {
		t.Fatalf("ops %s\n%s", got, graph.Print(rg))
	}
	if rg.Value(rg.Nodes[0].Output.Name).Type.String() != "f32[2,4,4,2]" || plan.Outputs[0].Layout.String() != "[S(dp),R,S(tp)]" {
		t.Fatalf("rfft local %s, output %s", rg.Nodes[0].Output.Type, plan.Outputs[0].Layout)
	}
}
