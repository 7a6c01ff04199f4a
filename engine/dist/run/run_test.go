package run

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func cpu(t *testing.T) backend.Backend {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func randomInputs(g *graph.Graph, seed uint64) map[string]*tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 2))
	out := map[string]*tensor.Tensor{}
	for _, v := range g.Inputs {
		vals := make([]float64, v.Type.NumElems())
		for i := range vals {
			vals[i] = r.NormFloat64()
		}
		out[v.Name] = tensor.FromFloat64(v.Type.DType, v.Type.Shape, vals)
	}
	return out
}

// close reports the worst |a-b| / (1+|b|).
func worst(a, b *tensor.Tensor) float64 {
	w := 0.0
	bv := b.Float64s()
	for i, x := range a.Float64s() {
		w = max(w, math.Abs(x-bv[i])/(1+math.Abs(bv[i])))
	}
	return w
}

func compileMLP(t *testing.T, meshSpec string, kv ...string) (*graph.Graph, *compiler.DistProgram) {
	g, err := graph.ParseFile("../../../docs/examples/mlp.tg")
	if err != nil {
		t.Fatal(err)
	}
	m, err := mesh.ParseMesh(meshSpec)
	if err != nil {
		t.Fatal(err)
	}
	ls := map[string]mesh.Layout{}
	for i := 0; i < len(kv); i += 2 {
		if ls[kv[i]], err = mesh.ParseLayout(kv[i+1], g.Value(kv[i]).Type.Rank()); err != nil {
			t.Fatal(err)
		}
	}
	dp, err := compiler.CompileDist(g, compiler.Options{Mesh: m, Layouts: ls})
	if err != nil {
		t.Fatal(err)
	}
	return g, dp
}

func TestShardedMLPAgreesWithOneDeviceWithTheReferenceAndWithItself(t *testing.T) {
	g, dp := compileMLP(t, "dp=2,tp=2", "x", "[S(dp),R]", "w1", "col:tp", "w2", "row:tp")
	in := randomInputs(g, 1)
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	single, err := cpu(t).Run(p, in)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := ShardInputs(dp.Plan, in)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := Inproc(context.Background(), dp, cpu(t), dist.Options{}, blocks)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := AssembleOutputs(dp.Plan, outs)
	if err != nil {
		t.Fatal(err)
	}
	if w := worst(whole[0], single[0]); w > 1e-5 {
		t.Fatalf("sharded softmax differs from one device by %g", w)
	}
	want, err := ref.RunDist(dp.Graph, blocks)
	if err != nil {
		t.Fatal(err)
	}
	for r := range outs {
		if w := worst(outs[r][0], want[r][0]); w > 1e-5 {
			t.Fatalf("rank %d differs from ref.RunDist by %g", r, w)
		}
	}
	again, err := Inproc(context.Background(), dp, cpu(t), dist.Options{}, blocks)
	if err != nil {
		t.Fatal(err)
	}
	for r := range outs {
		for i := range outs[r] {
			if !bytes.Equal(outs[r][i].Data, again[r][i].Data) {
				t.Fatalf("rank %d output %d differs between runs", r, i)
			}
		}
	}
}

func TestAHandWrittenRankProgramRunsAsWritten(t *testing.T) {
	g, err := graph.Parse(`graph pipe {
  mesh pp=2
  input %x: f32[3]
  %h = mul(%x, %x)
  %s = send(%h) {axis="pp", src=0, dst=1}
  %r: f32[3] = recv() {axis="pp", src=0, dst=1, dtype=f32, shape=[3]}
  %y = add(%r, %x)
  %t = all_reduce(%y) {axis="pp"}
  output %t, %s
}
`, "pipe.tg")
	if err != nil {
		t.Fatal(err)
	}
	dp, err := compiler.CompileDist(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ins := []map[string]*tensor.Tensor{
		{"x": tensor.FromFloat64(g.Inputs[0].Type.DType, []int{3}, []float64{1, 2, 3})},
		{"x": tensor.FromFloat64(g.Inputs[0].Type.DType, []int{3}, []float64{10, 20, 30})},
	}
	outs, err := Inproc(context.Background(), dp, cpu(t), dist.Options{}, ins)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.RunDist(g, ins)
	if err != nil {
		t.Fatal(err)
	}
	// rank 0: y = 0 + x0 ; rank 1: y = x0^2 + x1 ; all_reduce sums both.
	for r := range outs {
		if !bytes.Equal(outs[r][0].Data, want[r][0].Data) {
			t.Fatalf("rank %d: %v, ref %v", r, outs[r][0].Float64s(), want[r][0].Float64s())
		}
	}
	if got := outs[1][0].Float64s(); got[2] != 3+9+30 {
		t.Fatalf("pipeline result %v", got)
	}
}

func TestAFailingRankFailsTheRunWithoutHangingItsPeers(t *testing.T) {
	_, dp := compileMLP(t, "tp=2", "w2", "row:tp")
	g := dp.Graph
	good := randomInputs(g, 3)
	bad := randomInputs(g, 3)
	delete(bad, "x")
	done := make(chan error, 1)
	go func() {
		_, err := Inproc(context.Background(), dp, cpu(t), dist.Options{Timeout: 5 * time.Second}, []map[string]*tensor.Tensor{good, bad})
		done <- err
	}()
	select {
	case err := <-done:
		if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "rank 1") {
			t.Fatalf("got %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the run hung")
	}
}
