package sharded

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// movementGraph exercises the rules the catalogue models do not: transpose, reshape, slice,
// concat, reductions over several axes, broadcasting, mse_loss and a transposed matmul.
func movementGraph() (*graph.Graph, error) {
	b := graph.NewBuilder("movement")
	x := b.Input("x", numerics.F32, 8, 12)
	y := b.Input("y", numerics.F32, 12, 8)
	v := b.Input("v", numerics.F32, 8)
	t := b.Op("transpose", graph.Attrs{"perm": graph.Ints(1, 0)}, x)                                    // [12,8]
	s := b.Op("add", nil, b.Op("mul", nil, t, y), v)                                                    // [12,8] + [8]
	r := b.Op("reshape", graph.Attrs{"shape": graph.Ints(12, 2, 4)}, s)                                 // [12,2,4]
	m := b.Op("reduce_max", graph.Attrs{"axes": graph.Ints(1)}, r)                                      // [12,4]
	sl := b.Op("slice", graph.Attrs{"starts": graph.Ints(0, 0), "ends": graph.Ints(12, 2)}, m)          // [12,2]
	c := b.Op("concat", graph.Attrs{"axis": graph.Int(1)}, sl, sl)                                      // [12,4]
	mm := b.Op("matmul", graph.Attrs{"transpose_a": graph.Bool(true)}, y, c)                            // [8,4]
	mean := b.Op("reduce_mean", graph.Attrs{"axes": graph.Ints(0, 1), "keepdims": graph.Bool(true)}, s) // [1,1]
	loss := b.Op("mse_loss", nil, t, y)
	b.Output(mm, mean, loss, b.Op("softmax", graph.Attrs{"axis": graph.Int(0)}, s))
	return b.Build()
}

// headsGraph is a causal multi-head attention block as a transformer writes it: projections,
// the [rows, W] -> [B, S, H, D] head reshapes and their inverse, an output projection, and a
// scalar loss; headsGradGraph appends its gradient (attention_lse, attention_grad, the
// transposed matmuls, pending sums of partial gradients).
func headsGraph() (*graph.Graph, error) {
	const B, S, H, D = 2, 8, 4, 4
	W := int64(H * D)
	b := graph.NewBuilder("heads")
	x := b.Input("x", numerics.F32, B*S, int(W))
	w := map[string]*graph.Value{}
	for _, n := range []string{"wq", "wk", "wv", "wo"} {
		w[n] = b.Input(n, numerics.F32, int(W), int(W))
	}
	heads := func(v *graph.Value) *graph.Value {
		return b.Op("transpose", graph.Attrs{"perm": graph.Ints(0, 2, 1, 3)}, b.Op("reshape", graph.Attrs{"shape": graph.Ints(B, S, H, D)}, v))
	}
	mm := func(a, c *graph.Value) *graph.Value { return b.Op("matmul", nil, a, c) }
	a := b.Op("attention", graph.Attrs{"causal": graph.Bool(true)}, heads(mm(x, w["wq"])), heads(mm(x, w["wk"])), heads(mm(x, w["wv"])))
	a = b.Op("reshape", graph.Attrs{"shape": graph.Ints(B*S, W)}, b.Op("transpose", graph.Attrs{"perm": graph.Ints(0, 2, 1, 3)}, a))
	b.Named("loss", "reduce_mean", graph.Attrs{"axes": graph.Ints(0, 1)}, b.Op("mul", nil, mm(a, w["wo"]), x))
	b.Output(b.Graph().Value("loss"))
	return b.Build()
}

func headsGradGraph() (*graph.Graph, error) {
	g, err := headsGraph()
	if err != nil {
		return nil, err
	}
	return autodiff.Grad(g, "loss", "x", "wq", "wk", "wv", "wo")
}

// TestAnyLayoutOfAnyInputGivesTheOneDeviceResult draws a mesh of one or two axes and, for
// every input of a graph, a layout (each dim replicated or sharded over a free axis, sometimes
// a pending sum), then checks the sharded run against one device and ref.RunDist.
func TestAnyLayoutOfAnyInputGivesTheOneDeviceResult(t *testing.T) {
	be, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	graphs := map[string]func() (*graph.Graph, error){"movement": movementGraph, "mlp": mlpGraph, "attention": attentionGraph, "layernorm": layernormGraph, "matmul": matmulGraph,
		"heads": headsGraph, "heads-grad": headsGradGraph}
	names := []string{"attention", "heads", "heads-grad", "layernorm", "matmul", "mlp", "movement"}
	// Every rule of the shard pass on its own beside the composites (most draws are one-op
	// rule graphs): the composites meet most rules under a few layouts only.
	for _, r := range Rules() {
		graphs["rule/"+r.Name] = r.Graph
		names = append(names, "rule/"+r.Name)
	}
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.SampledFrom(names).Draw(rt, "graph")
		g, err := graphs[name]()
		if err != nil {
			rt.Fatal(err)
		}
		meshSpec := rapid.SampledFrom([]string{"a=2", "a=4", "a=2,b=2", "a=1,b=2", "a=2,b=1"}).Draw(rt, "mesh")
		axes := []string{"a"}
		if strings.Contains(meshSpec, "b=") {
			axes = append(axes, "b")
		}
		layouts := map[string]string{}
		for _, in := range g.Inputs {
			free := append([]string(nil), axes...)
			var dims []string
			for _, d := range in.Type.Shape {
				pick := rapid.IntRange(0, len(free)).Draw(rt, in.Name+"-dim")
				if pick == len(free) || d%4 != 0 {
					dims = append(dims, "R")
					continue
				}
				dims = append(dims, "S("+free[pick]+")")
				free = append(free[:pick], free[pick+1:]...)
			}
			l := "[" + strings.Join(dims, ",") + "]"
			if len(free) > 0 && rapid.IntRange(0, 4).Draw(rt, in.Name+"-partial") == 0 {
				l += "+P(" + free[0] + ")"
			}
			layouts[in.Name] = l
		}
		c := Case{Name: fmt.Sprintf("%s/%s/%v", name, meshSpec, layouts), Graph: g, Mesh: meshSpec, Layouts: layouts, K: 32, Seed: 99}
		o, err := c.Run(be, dist.Deterministic)
		if err != nil {
			rt.Fatalf("%s: %v", c.Name, err)
		}
		for i := range o.Single {
			// A pending-sum input is rebuilt from addends, which rounds once more; allow for
			// it with the reduction tolerance (the guard stays on).
			tol := c.Tolerance(o.Single[i].DType)
			if r := harness.Check(o.Whole[i], o.Single[i], tol); !r.Pass {
				rt.Fatalf("%s output %d vs one device: %s\n%s", c.Name, i, r.Reason, graph.Print(o.Program.Graph))
			}
			for rk := range o.Ranks {
				if r := harness.Check(o.Ranks[rk][i], o.Ref[rk][i], tol); !r.Pass {
					rt.Fatalf("%s rank %d output %d vs ref.RunDist: %s", c.Name, rk, i, r.Reason)
				}
			}
		}
	})
}
