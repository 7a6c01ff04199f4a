package training

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/dtensor"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/dist/run"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func meshCfg(t *testing.T, model, meshText string, steps int) (Config, int) {
	t.Helper()
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	opt, err := NewOptimizer("adamw", 1e-2, b)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Model: model, Steps: steps, Seed: 1, Backend: b, Optimizer: opt}
	world := 1
	if meshText != "" {
		ms, err := mesh.ParseMesh(meshText)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Mesh, world = ms, ms.World()
	}
	return cfg, world
}

// On a dp=2,tp=2 mesh each model trains to the one-rank run's losses (the same function of
// the same data and parameters; only the order of a few sums differs), and two runs agree to
// the bit: every loss and the digest of the parameters gathered from the ranks' blocks.
func TestTensorParallelTrainsAsOneRankAndRepeatsItsBits(t *testing.T) {
	ctx := context.Background()
	for _, model := range Models {
		one := oneRank(t, model, 8)
		var runs []*Result
		for range 2 {
			cfg, world := meshCfg(t, model, "dp=2,tp=2", 8)
			r, err := Inproc(ctx, cfg, world)
			if err != nil {
				t.Fatalf("%s: %v", model, err)
			}
			runs = append(runs, r)
		}
		a, b := runs[0], runs[1]
		if a.Mesh != "dp=2,tp=2" || a.World != 4 || len(a.Losses) != 8 {
			t.Fatalf("%s: %+v", model, a)
		}
		for i := range a.Losses {
			if a.Losses[i].Bits != b.Losses[i].Bits {
				t.Errorf("%s step %d: loss bits %s then %s", model, i+1, a.Losses[i].Bits, b.Losses[i].Bits)
			}
		}
		closeToOneRank(t, model+" on dp=2,tp=2", a, one)
		if a.Digest != b.Digest || len(a.Digest) != 64 {
			t.Errorf("%s: digests %s and %s", model, a.Digest, b.Digest)
		}
		if a.Losses[7].Value >= a.Losses[0].Value {
			t.Errorf("%s does not learn on the mesh: %v -> %v", model, a.Losses[0].Value, a.Losses[7].Value)
		}
	}
}

// Checkpoints hold each rank's blocks: a run stopped at step 4 and resumed ends with the
// uninterrupted run's bits.
func TestTensorParallelResumesToTheSameBits(t *testing.T) {
	ctx := context.Background()
	cfg, world := meshCfg(t, "transformer-block", "dp=2,tp=2", 6)
	straight, err := Inproc(ctx, cfg, world)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first, _ := meshCfg(t, "transformer-block", "dp=2,tp=2", 4)
	first.CheckpointDir, first.CheckpointEvery = dir, 2
	if _, err := Inproc(ctx, first, world); err != nil {
		t.Fatal(err)
	}
	rest, _ := meshCfg(t, "transformer-block", "dp=2,tp=2", 6)
	rest.CheckpointDir, rest.Resume = dir, true
	r, err := Inproc(ctx, rest, world)
	if err != nil {
		t.Fatal(err)
	}
	if r.StartStep != 4 || r.Digest != straight.Digest {
		t.Fatalf("resumed from %d with digest %s, straight %s", r.StartStep, r.Digest, straight.Digest)
	}
	for i, l := range r.Losses {
		if l.Bits != straight.Losses[4+i].Bits {
			t.Errorf("step %d: %s resumed, %s straight", l.Step, l.Bits, straight.Losses[4+i].Bits)
		}
	}
}

func TestTensorParallelRefusals(t *testing.T) {
	ctx := context.Background()
	cfg, _ := meshCfg(t, "mlp", "dp=2,tp=2", 2)
	if _, err := Inproc(ctx, cfg, 2); errs.CodeOf(err) != errs.Input {
		t.Errorf("a world of 2 for a mesh of 4: %v", err)
	}
	cfg, world := meshCfg(t, "mlp", "tp=3", 2)
	if _, err := Inproc(ctx, cfg, world); errs.CodeOf(err) != errs.Shape || !strings.Contains(err.Error(), "mesh axis tp") {
		t.Errorf("tp=3 over a hidden width of 64: %v", err)
	}
	cfg, world = meshCfg(t, "mlp", "sp=2,tp=2", 2)
	if _, err := Inproc(ctx, cfg, world); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), `"sp"`) {
		t.Errorf("an sp axis: %v", err)
	}
	// Pipelines (pipeline.go) combine with dp only.
	cfg, world = meshCfg(t, "mlp", "pp=2,tp=2", 2)
	if _, err := Inproc(ctx, cfg, world); errs.CodeOf(err) != errs.Unsupported || !strings.Contains(err.Error(), `"tp" with pp`) {
		t.Errorf("pp with tp: %v", err)
	}
}

// A NaN in one rank's gradient blocks stops every rank of the mesh with E_NAN_INF (that rank's
// own message, the count on the others), none waiting on the rest.
func TestTensorParallelRanksAgreeOnANaN(t *testing.T) {
	ms, err := mesh.ParseMesh("dp=2,tp=2")
	if err != nil {
		t.Fatal(err)
	}
	ts := dist.NewInproc(4)
	errsOut := make([]error, 4)
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := dtensor.NewGroups(ms, dist.NewComm(ts[r], dist.Options{Mode: dist.Deterministic}))
			if err != nil {
				errsOut[r] = err
				return
			}
			s := &meshStep{ms: ms, groups: g, timeout: 5 * time.Second}
			var local error
			if r == 2 {
				local = errs.New(errs.NaNInf, "train: step 7 on rank 2: grad_w1[3] = NaN")
			}
			errsOut[r] = s.agree(context.Background(), local, 7)
		}()
	}
	wg.Wait()
	for r, err := range errsOut {
		want := "1 rank(s) of mesh dp=2,tp=2"
		if r == 2 {
			want = "grad_w1[3] = NaN"
		}
		if errs.CodeOf(err) != errs.NaNInf || !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: %v, want E_NAN_INF saying %q", r, err, want)
		}
	}
}

// compileTPStep compiles the transformer block's training step (forward, loss, gradient) for
// a mesh with train's tensor-parallel layouts.
func compileTPStep(t testing.TB, meshText string) (*Model, *compiler.DistProgram) {
	t.Helper()
	ms, err := mesh.ParseMesh(meshText)
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultDims("transformer-block")
	m, err := Build("transformer-block", numerics.F32, d, d.Batch)
	if err != nil {
		t.Fatal(err)
	}
	layouts, err := TPLayouts(m, ms)
	if err != nil {
		t.Fatal(err)
	}
	gg, err := autodiff.Grad(m.Graph, "loss", m.Params...)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := compiler.CompileDist(gg, compiler.Options{Mesh: ms, Layouts: layouts})
	if err != nil {
		t.Fatal(err)
	}
	return m, dp
}

// tpInputs is every rank's blocks of the step's inputs: parameters and batch drawn from seed.
func tpInputs(t testing.TB, m *Model, dp *compiler.DistProgram, seed uint64) (backend.Backend, []map[string]*tensor.Tensor) {
	t.Helper()
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	global := m.Init(seed)
	global["x"], global["target"] = m.Batch(seed, 1, 0, 1)
	inputs, err := run.ShardInputs(dp.Plan, global)
	if err != nil {
		t.Fatal(err)
	}
	return b, inputs
}

// unbucketed is dp with every bucket run as its all_reduces one by one, in the same order.
func unbucketed(dp *compiler.DistProgram) *compiler.DistProgram {
	out := *dp
	out.Steps = nil
	for _, st := range dp.Steps {
		if st.Bucket == nil {
			out.Steps = append(out.Steps, st)
			continue
		}
		for _, n := range st.Bucket {
			out.Steps = append(out.Steps, compiler.Step{Node: n})
		}
	}
	return &out
}

// The transformer block's tensor-parallel step sums its weight gradients over dp in one
// bucket at the end of the program, not one all_reduce each between the backward's kernels,
// and the bucket gives every rank's loss and gradients the bits of the all_reduces run alone.
func TestTensorParallelGradientSumsRunAsOneBucket(t *testing.T) {
	m, dp := compileTPStep(t, "dp=2,tp=2")
	last := dp.Steps[len(dp.Steps)-1]
	var dpSums, collectives int
	for _, st := range dp.Steps {
		if st.Node != nil {
			collectives++
			if st.Node.Op == "all_reduce" && st.Node.StringAttr("axis") == "dp" && st.Node.StringAttr("op") == "sum" {
				dpSums++
			}
		}
		if st.Bucket != nil {
			collectives++
		}
	}
	// 13 parameters: their 12 dp sums and the loss's dp average stand at the end; the sums
	// share one bucket, the average (another reduction) runs alone before it.
	if last.Bucket == nil || len(last.Bucket) != 12 || dpSums != 0 {
		t.Fatalf("last step %+v, %d dp sums outside it", last, dpSums)
	}
	for _, n := range last.Bucket {
		if n.StringAttr("axis") != "dp" || n.StringAttr("op") != "sum" {
			t.Fatalf("bucket holds %s over %s", n.Op, n.StringAttr("axis"))
		}
	}
	t.Logf("%d collective calls a step (%d steps)", collectives, len(dp.Steps))

	b, inputs := tpInputs(t, m, dp, 3)
	opts := dist.Options{Mode: dist.Deterministic, Timeout: 10 * time.Second}
	got, err := run.Inproc(context.Background(), dp, b, opts, inputs)
	if err != nil {
		t.Fatal(err)
	}
	want, err := run.Inproc(context.Background(), unbucketed(dp), b, opts, inputs)
	if err != nil {
		t.Fatal(err)
	}
	for r := range got {
		for i := range got[r] {
			if !bytes.Equal(got[r][i].Data, want[r][i].Data) {
				t.Fatalf("rank %d output %d: the bucket changed the bits", r, i)
			}
		}
	}
	if g := got[0][len(got[0])-1]; g.Float64(0) == 0 && g.Float64(g.Len()-1) == 0 {
		t.Fatalf("the last gradient starts and ends with zeros: nothing was summed")
	}
}
