package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/backend/backendtest"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/parse"
)

// fakeEngine is FixedClock with a planted bug (corrupt) and a count of timings.
type fakeEngine struct {
	FixedClock
	corrupt bool
	timed   int
}

func newFake(t *testing.T, ms float64) *fakeEngine {
	return &fakeEngine{FixedClock: FixedClock{Backend: backendtest.CPU(t), MS: ms}}
}

func (f *fakeEngine) Run(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	outs, err := f.FixedClock.Run(p, in)
	if err == nil && f.corrupt {
		outs[0].SetFloat64(0, outs[0].Float64(0)*2+1)
	}
	return outs, err
}

func (f *fakeEngine) Time(p *compiler.Program, in map[string]*tensor.Tensor, warmup, reps int) ([]float64, error) {
	f.timed++
	out, err := f.FixedClock.Time(p, in, warmup, reps)
	for i := range out {
		out[i] += 0.001 * float64(i%3)
	}
	return out, err
}

var smallShapes = []string{"24x300", "conv2d:2x3x9x8x5x3", "matmul:16x24x32", "fp8gemm:16x24x32", "batch_matmul:2x8x8x16", "attention:1x2x16x8", "attention_causal:1x2x16x8"}

// gpuBackend is the registered CUDA backend, or skips the test with the reason.
func gpuBackend(t *testing.T) backend.Backend {
	t.Helper()
	gpu, err := backend.Get("cuda")
	if err == nil {
		err = gpu.Available()
	}
	if err != nil {
		t.Skip("cuda unavailable: " + err.Error())
	}
	return gpu
}

// TestRunEndToEnd runs every op of the table through the whole pipeline with a fake clock and
// a fake torch: every case passes both checks and is timed, the table and the JSON say so, and
// the JSON is what `report ingest` parses.
func TestRunEndToEnd(t *testing.T) {
	cases, err := Select(Selection{Shapes: smallShapes, DTypes: []string{"f32", "bf16"}})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, o := range ops {
		want += map[bool]int{false: 2, true: len(o.dtypes)}[o.ownDTypes] // fp8gemm and the FFTs keep their dtypes
	}
	if len(cases) != want {
		t.Fatalf("%d cases for %d ops, want %d", len(cases), len(ops), want)
	}
	eng, orc := newFake(t, 1), RefOracle{MS: 2}
	var log bytes.Buffer
	opt := Options{Reps: 20, Warmup: 2, Seed: 7, Log: &log}
	rows, dev, err := Run(eng, orc, cases, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if !r.Passed() {
			t.Errorf("%s: %s", r.Case, r.Verdict())
			continue
		}
		if math.Abs(r.Speedup()-2) > 0.01 || len(r.EngineSamples) != 20 || r.GBps() <= 0 {
			t.Errorf("%s: speedup %g, %d samples, %g GB/s", r.Case, r.Speedup(), len(r.EngineSamples), r.GBps())
		}
		if r.RefCheck.Elements == 0 || r.Check.Elements == 0 {
			t.Errorf("%s: a check compared nothing (%d vs torch, %d vs ref)", r.Case, r.Check.Elements, r.RefCheck.Elements)
		}
	}
	// Each case is timed in DefaultRounds rounds (alternating which side goes first).
	if eng.timed != DefaultRounds*len(cases) || strings.Count(log.String(), "\n") != len(cases) {
		t.Errorf("%d engine timings, log:\n%s", eng.timed, log.String())
	}
	meta := Meta{Machine: "host", Started: time.Unix(1700000000, 0), Device: dev, Oracle: orc.Describe(), Torch: orc.Version(), Opt: opt, Command: "tessera-qa bench --vs torch"}
	var table bytes.Buffer
	PrintTable(&table, meta, rows)
	for _, want := range []string{"SPEEDUP = torch ms / engine ms (>1: the engine is faster)", "2.00x", "%COPY", "copy bandwidth", "softmax", "attention_causal"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	doc, err := json.Marshal(NewReport(meta, rows))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := parse.Parse("bench.json", doc)
	if err != nil {
		t.Fatalf("report ingest's parser rejects the bench JSON: %v\n%s", err, doc)
	}
	if parsed == nil {
		t.Fatal("no report parsed")
	}
	var back Report
	if err := json.Unmarshal(doc, &back); err != nil || len(back.Rows) != len(cases) || back.Rows[0].Ratio != back.Rows[0].EngineMS/back.Rows[0].RefMS ||
		back.Rows[0].Ratio > 0.51 || back.Rows[0].Device != dev.Class {
		t.Errorf("JSON rows: %v %+v", err, back.Rows[:1])
	}
}

// TestRunCatchesDisagreement: an engine bug is caught by both checks, a torch that disagrees
// by the torch check alone; failed cases are not timed and are listed in the JSON's env.
func TestRunCatchesDisagreement(t *testing.T) {
	cases, err := Select(Selection{Ops: []string{"softmax", "matmul"}, Shapes: []string{"16x64", "matmul:8x16x32"}, DTypes: []string{"f32"}})
	if err != nil {
		t.Fatal(err)
	}
	eng := newFake(t, 1)
	eng.corrupt = true
	rows, dev, err := Run(eng, RefOracle{MS: 1}, cases, Options{Reps: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Passed() || r.Check.Pass || r.RefCheck.Pass || r.Timed() {
			t.Errorf("%s: a corrupted engine output passed (%s)", r.Case, r.Verdict())
		}
	}
	if eng.timed != 0 {
		t.Errorf("failed cases were timed %d times", eng.timed)
	}
	rep := NewReport(Meta{Device: dev, Opt: Options{Reps: 3}}, rows)
	if len(rep.Rows) != 0 || !strings.Contains(rep.Env["failed"], "softmax/f32/16x64") {
		t.Errorf("report rows %d, failed %q", len(rep.Rows), rep.Env["failed"])
	}

	rows, _, _ = Run(newFake(t, 1), RefOracle{MS: 1, Skew: 0.01}, cases[:1], Options{Reps: 3, Seed: 1})
	if r := rows[0]; r.Check.Pass || !r.RefCheck.Pass || !strings.HasPrefix(r.Verdict(), "FAIL vs torch") {
		t.Errorf("skewed torch: %s", r.Verdict())
	}
}

func TestSelect(t *testing.T) {
	all, err := Select(Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if all[0].Op != "copy" || len(all) < 15 {
		t.Errorf("default cases start %v, %d in all", all[0], len(all))
	}
	got, err := Select(Selection{Ops: []string{"softmax", "matmul", "softmax"}, Shapes: []string{"1024x512", "matmul:64x64x64"}, DTypes: []string{"bf16"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"matmul/bf16/64x64x64", "softmax/bf16/1024x512"}
	if len(got) != len(want) || got[0].String() != want[0] || got[1].String() != want[1] {
		t.Errorf("got %v, want %v (table order, scoped shapes, one dtype)", got, want)
	}
	// A shape of the wrong rank for every selected op, an unknown op, a bad dtype or dim fail.
	for _, sel := range []Selection{
		{Ops: []string{"softmax"}, Shapes: []string{"2x3x4"}},
		{Ops: []string{"nope"}},
		{DTypes: []string{"fp8e4m3"}},
		{Shapes: []string{"8x-1"}},
		{Ops: []string{"softmax"}, Shapes: []string{"matmul:8x8x8"}},
	} {
		if _, err := Select(sel); err == nil || !strings.Contains(err.Error(), "E_INPUT") {
			t.Errorf("%+v: err %v, want E_INPUT", sel, err)
		}
	}
}

// TestCheckParallelAgrees: the split comparison gives harness.Check's verdict and points at the
// planted element, whichever part it lands in.
func TestCheckParallelAgrees(t *testing.T) {
	want := randomTensor(numerics.F32, []int{1 << 21}, 3, harness.Dist{Kind: harness.DistNormal})
	tol := harness.DefaultTolerance(numerics.F32)
	if r := checkParallel(want.Clone(), want, tol, nil); !r.Pass || r.Elements != want.Len() {
		t.Fatalf("identical tensors: %+v", r)
	}
	for _, at := range []int{0, 1<<20 + 5, 1<<21 - 1} {
		got := want.Clone()
		got.SetFloat64(at, got.Float64(at)+1)
		r, whole := checkParallel(got, want, tol, nil), harness.Check(got, want, tol)
		if r.Pass || whole.Pass || r.Worst != at || r.Mismatches != whole.Mismatches {
			t.Errorf("planted at %d: parallel %+v, whole pass=%v worst=%d", at, r, whole.Pass, whole.Worst)
		}
	}
}

// TestCheckParallelSplitsTheBound: with a per-element bound, each part gets its own slice of
// it: an error that only the bound at that element absorbs passes, and the same error one
// element further (where the bound is 0) fails, in every part.
func TestCheckParallelSplitsTheBound(t *testing.T) {
	want := randomTensor(numerics.F32, []int{1 << 21}, 3, harness.Dist{Kind: harness.DistNormal})
	tol := harness.DefaultTolerance(numerics.F32)
	for _, at := range []int{0, 1<<20 + 5, 1<<21 - 2} {
		bound := make([]float64, want.Len())
		bound[at] = 0.5
		got := want.Clone()
		got.SetFloat64(at, got.Float64(at)+0.25)
		if r := checkParallel(got, want, tol, bound); !r.Pass || r.BoundRMS <= 0 {
			t.Errorf("error 0.25 within the bound 0.5 at %d: %s (bound RMS %g)", at, r.Reason, r.BoundRMS)
		}
		got = want.Clone()
		got.SetFloat64(at+1, got.Float64(at+1)+0.25)
		r, whole := checkParallel(got, want, tol, bound), harness.CheckBound(got, want, tol, bound)
		if r.Pass || whole.Pass || r.Worst != at+1 {
			t.Errorf("error 0.25 at %d where the bound is 0: parallel pass=%v worst=%d, whole pass=%v", at+1, r.Pass, r.Worst, whole.Pass)
		}
	}
}

// TestRandomInputsIndependentOfCores: same seed, same bits whatever GOMAXPROCS, never zeros.
func TestRandomInputsIndependentOfCores(t *testing.T) {
	a := randomTensor(numerics.BF16, []int{3, chunkElems + 7}, 11, distLogits)
	b := randomTensor(numerics.BF16, []int{3, chunkElems + 7}, 11, distLogits)
	if !bytes.Equal(a.Data, b.Data) {
		t.Error("same seed, different inputs")
	}
	if c := randomTensor(numerics.BF16, []int{3, chunkElems + 7}, 12, distLogits); bytes.Equal(a.Data, c.Data) {
		t.Error("different seeds, same inputs")
	}
	zeros := 0
	for i := range a.Len() {
		if a.Float64(i) == 0 {
			zeros++
		}
	}
	if zeros > a.Len()/100 {
		t.Errorf("%d of %d inputs are zero", zeros, a.Len())
	}
}

func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3 = %g", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median of 4 = %g", m)
	}
}

// orderLog records which side ran, in order.
type orderLog struct{ calls []string }

type loggedEngine struct {
	Engine
	log *orderLog
}

func (e loggedEngine) Time(p *compiler.Program, in map[string]*tensor.Tensor, warmup, reps int) ([]float64, error) {
	e.log.calls = append(e.log.calls, fmt.Sprintf("engine:%d", reps))
	return e.Engine.Time(p, in, warmup, reps)
}

type loggedOracle struct {
	RefOracle
	log *orderLog
}

func (o loggedOracle) Run(req Request) (Reply, error) {
	o.log.calls = append(o.log.calls, fmt.Sprintf("torch:%d", req.Reps))
	return o.RefOracle.Run(req)
}

// Neither side always runs after the other: the reps are split into rounds whose order
// alternates, torch first in round 0, and every rep of every round is kept.
func TestTimingAlternatesWhichSideGoesFirst(t *testing.T) {
	cases, err := Select(Selection{Shapes: []string{"24x300"}, DTypes: []string{"f32"}, Ops: []string{"copy"}})
	if err != nil {
		t.Fatal(err)
	}
	log := &orderLog{}
	rows, _, err := Run(loggedEngine{newFake(t, 1), log}, loggedOracle{RefOracle{MS: 2}, log}, cases, Options{Reps: 8, Seed: 1, Rounds: 4})
	if err != nil || !rows[0].Passed() {
		t.Fatalf("err %v, row %s", err, rows[0].Verdict())
	}
	want := []string{"torch:2", "engine:2", "engine:2", "torch:2", "torch:2", "engine:2", "engine:2", "torch:2"}
	if !slices.Equal(log.calls, want) {
		t.Fatalf("order %v, want %v", log.calls, want)
	}
	if len(rows[0].EngineSamples) != 8 || len(rows[0].TorchSamples) != 8 {
		t.Fatalf("%d engine and %d torch samples, want 8 each", len(rows[0].EngineSamples), len(rows[0].TorchSamples))
	}
	if s := Spread([]float64{1, 1, 1, 2, 3}); s != 2 {
		t.Fatalf("Spread = %v, want (3-1)/1", s)
	}
}
