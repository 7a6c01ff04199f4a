package run

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// An empty batch sharded over dp: every rank holds 0 rows, the matmul and softmax give empty
// blocks, and the sum over the batch (an all_reduce of empty partial sums) is 0 and the mean
// NaN on every rank, as torch gives on one device.
func TestAnEmptyShardedBatchRunsOnEveryRankWithTorchsAnswer(t *testing.T) {
	src := `graph e {
  input %x: f32[0,8]
  input %w: f32[8,4]
  %h = matmul(%x, %w)
  %p = softmax(%h)
  %s = reduce_sum(%p) {axes=[0]}
  %m = reduce_mean(%h) {axes=[0]}
  output %p, %s, %m
}
`
	g, err := graph.Parse(src, "e.tg")
	if err != nil {
		t.Fatal(err)
	}
	m, err := mesh.ParseMesh("dp=4")
	if err != nil {
		t.Fatal(err)
	}
	l, err := mesh.ParseLayout("[S(dp),R]", 2)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := compiler.CompileDist(g, compiler.Options{Mesh: m, Layouts: map[string]mesh.Layout{"x": l}})
	if err != nil {
		t.Fatal(err)
	}
	in := randomInputs(g, 3)
	blocks, err := ShardInputs(dp.Plan, in)
	if err != nil {
		t.Fatal(err)
	}
	for r := range blocks {
		if x := blocks[r]["x"]; !slices.Equal(x.Shape, []int{0, 8}) {
			t.Fatalf("rank %d holds x %v, want [0 8]", r, x.Shape)
		}
	}
	outs, err := Inproc(context.Background(), dp, cpu(t), dist.Options{}, blocks)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := AssembleOutputs(dp.Plan, outs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(whole[0].Shape, []int{0, 4}) {
		t.Errorf("softmax of the empty batch is %v, want [0 4]", whole[0].Shape)
	}
	for i, v := range whole[1].Float64s() {
		if v != 0 {
			t.Errorf("sum over the empty batch, column %d: %g, want 0", i, v)
		}
	}
	for i, v := range whole[2].Float64s() {
		if !math.IsNaN(v) {
			t.Errorf("mean over the empty batch, column %d: %g, want NaN (0/0)", i, v)
		}
	}
	if len(whole[1].Float64s()) != 4 || len(whole[2].Float64s()) != 4 {
		t.Errorf("sum %v, mean %v: want 4 columns each", whole[1].Shape, whole[2].Shape)
	}
}

// Shards must be even: a batch of 2 rows on 4 ranks (two ranks with a row, two with none)
// is refused with E_SHAPE naming the tensor, not run with made-up empty shards.
func TestUnevenShardsAreRefusedWithACodedError(t *testing.T) {
	g, err := graph.Parse("graph e {\n  input %x: f32[2,8]\n  %y = relu(%x)\n  output %y\n}\n", "e.tg")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := mesh.ParseMesh("dp=4")
	l, _ := mesh.ParseLayout("[S(dp),R]", 2)
	_, err = compiler.CompileDist(g, compiler.Options{Mesh: m, Layouts: map[string]mesh.Layout{"x": l}})
	if errs.CodeOf(err) != errs.Shape || !strings.Contains(err.Error(), "not divisible") || !strings.Contains(err.Error(), "x") {
		t.Fatalf("got %v, want E_SHAPE: not divisible", err)
	}
}
