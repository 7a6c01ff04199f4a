package differential

import (
	"math"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// The package's tests share one torch oracle, as a suite does.
var shared struct {
	once sync.Once
	o    *Oracle
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.o != nil {
		shared.o.Close()
	}
	os.Exit(code)
}

// startTorch returns the real torch oracle, or skips when no interpreter has torch and none
// was named (TESSERA_QA_PYTHON set means torch was asked for: then its absence fails).
func startTorch(t *testing.T) *Oracle {
	t.Helper()
	shared.once.Do(func() { shared.o, shared.err = Start(Config{Framework: "torch"}) })
	if errs.CodeOf(shared.err) == errs.NoDevice && os.Getenv(PythonEnv) == "" {
		t.Skip(shared.err.Error())
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.o
}

func TestTorchOracleAgreesOnSomeCatalogueOps(t *testing.T) {
	o := startTorch(t)
	var specs []golden.Spec
	for _, op := range []string{"exp", "matmul", "transpose", "cast", "reduce_sum"} {
		for _, dt := range []numerics.DType{numerics.F32, numerics.BF16, numerics.F8E4M3, numerics.I8} {
			specs = append(specs, golden.SpecsFor(op, dt)...)
		}
	}
	cases, err := Cases(specs, 2)
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	outs := Runner{Oracle: o, Target: Target{Device: "cpu"}, Backend: cpu, Batch: 7}.Run(cases)
	if len(outs) != len(cases) {
		t.Fatalf("%d outcomes for %d cases", len(outs), len(cases))
	}
	for i, out := range outs {
		if out.Result.Verdict != harness.VerdictPass {
			t.Errorf("%s: %s %s", out.Result.Case, out.Result.Verdict, out.Result.Reason)
		}
		if out.Result.Case != cases[i].Name() || len(out.Result.Outputs) == 0 {
			t.Errorf("outcome %d is %q with %d outputs, want case %s", i, out.Result.Case, len(out.Result.Outputs), cases[i].Name())
		}
	}
	if cases[1].Draw != 1 || cases[1].Seed == cases[0].Seed || !strings.HasSuffix(cases[1].Name(), "#1") {
		t.Errorf("second draw: %+v", cases[1].Name())
	}
}

// A broken engine must fail against the oracle, and the failure must say which side is off.
func TestTorchOracleCatchesABrokenEngine(t *testing.T) {
	o := startTorch(t)
	var specs []golden.Spec
	for _, s := range golden.SpecsFor("exp", numerics.F32) {
		if !s.Empty { // an empty output has no element 0 to break
			specs = append(specs, s)
		}
	}
	cases, err := Cases(specs, 1)
	if err != nil {
		t.Fatal(err)
	}
	outs := Runner{Oracle: o, Target: Target{Device: "cpu"}, Backend: flipBackend{}, ArtifactsDir: t.TempDir()}.Run(cases)
	for _, out := range outs {
		r := out.Result
		if r.Verdict != harness.VerdictFail || !strings.Contains(r.Reason, "the golden model agrees with torch (the engine is the suspect)") {
			t.Errorf("%s: %s %q", r.Case, r.Verdict, r.Reason)
		}
		if r.Replay == "" {
			t.Errorf("%s: no replay manifest", r.Case)
		}
	}
}

func TestTorchOracleNativeModeAndErrorsPerCase(t *testing.T) {
	o := startTorch(t)
	cases, err := Cases(golden.SpecsFor("gelu", numerics.BF16)[:1], 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Prepare("gelu", cases[0].Spec.Graph, cases[0].Inputs)
	if err != nil {
		t.Fatal(err)
	}
	bad := p.Case
	bad.Name = "bad"
	bad.Nodes = append([]WireNode{}, bad.Nodes...)
	bad.Nodes[0].Op = "no_such_op"
	res, err := o.Eval(Target{Device: "cpu"}, []WireCase{p.Case, bad})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res[0].Mode, "f32, rounded once") {
		t.Errorf("bf16 gelu mode %q, want the f32 upcast", res[0].Mode)
	}
	if !res[1].Unsupported || !strings.Contains(res[1].Error, "no_such_op") {
		t.Errorf("unknown op: %+v", res[1])
	}
	res, err = o.Eval(Target{Device: "cpu", Native: true}, []WireCase{p.Case})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Mode != "native" {
		t.Errorf("native request computed as %q", res[0].Mode)
	}
	res, err = o.Eval(Target{Device: "no-such-device"}, []WireCase{p.Case})
	if err != nil || res[0].Error == "" {
		t.Errorf("unknown device: %v %+v", err, res)
	}
}

// The contract sums a 16-bit matmul in f32, and so must the oracle on every machine: where
// torch's own CPU kernel sums in bf16 (torch 1.13 without avx512_bf16), the oracle computes in
// f32 and says so. 1 followed by 256 products of 2^-8 is exactly 2 in f32 and 1 in bf16 steps.
func TestTorchOracleSumsBF16MatmulsInF32(t *testing.T) {
	o := startTorch(t)
	g, err := graph.Parse(`graph probe {
  input %a: bf16[1,257]
  input %b: bf16[257,1]
  %c: bf16[1,1] = matmul(%a, %b)
  output %c
}`, "probe.tg")
	if err != nil {
		t.Fatal(err)
	}
	col := make([]float64, 257)
	ones := make([]float64, 257)
	for i := range col {
		col[i], ones[i] = math.Ldexp(1, -8), 1
	}
	col[0] = 1
	in := map[string]*tensor.Tensor{"a": tensor.FromFloat64(numerics.BF16, []int{1, 257}, ones),
		"b": tensor.FromFloat64(numerics.BF16, []int{257, 1}, col)}
	p, err := Prepare("probe", g, in)
	if err != nil {
		t.Fatal(err)
	}
	res, err := o.Eval(Target{Device: "cpu"}, []WireCase{p.Case})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := p.Decode(res[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := outs[0].Float64(0); got != 2 {
		t.Fatalf("bf16 matmul through the oracle = %v (mode %q), want 2 (f32 accumulation)", got, res[0].Mode)
	}
	t.Logf("mode %q", res[0].Mode)
}
