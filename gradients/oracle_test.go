package gradients

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// startTorch starts the torch oracle or skips (fails when $TESSERA_QA_PYTHON names one).
func startTorch(t *testing.T) *differential.Oracle {
	t.Helper()
	o, err := differential.Start(differential.Config{Framework: "torch"})
	if err != nil {
		if errs.CodeOf(err) == errs.NoDevice && os.Getenv(differential.PythonEnv) == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func TestCatalogueGradientsAgreeWithTorch(t *testing.T) {
	o := startTorch(t)
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	results, err := RunWith(b, nil, Options{Vs: &Vs{Oracle: o, Target: differential.Target{Device: "cpu"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d cases in %v", len(results), time.Since(t0))
	for _, r := range Rows(results, nil) {
		if r.Verdict == Fail || testing.Verbose() {
			t.Logf("%-16s %-8s %-11s %-11s compared %d worst %.2g %s | %s", r.Op, r.DType, r.Verdict, r.Vs, r.VsCompared, r.VsWorst, r.Reason, r.VsReason)
		}
		if r.Verdict == Fail && !strings.Contains(r.Reason, "no case") {
			t.Errorf("%s %s: %s", r.Op, r.DType, r.Reason)
		}
	}
}

// oracleCase is the first f32 catalogue case of op, checked on the cpu backend, with its wire
// case: what judge needs.
func oracleCase(t *testing.T, op string) *pending {
	t.Helper()
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := Cases([]string{op})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.DType != numerics.F32 {
			continue
		}
		p := &pending{c: c, f: feedOf(c)}
		p.p, p.widened, p.prep = prepareVJP(c, p.f)
		if p.prep != nil {
			t.Fatal(p.prep)
		}
		p.res, p.grads = checkCase(b, c, p.f)
		if !p.res.Pass || len(p.grads) == 0 {
			t.Fatalf("%s: %+v", c.Name, p.res)
		}
		return p
	}
	t.Fatalf("no f32 case of %s", op)
	return nil
}

// answer is the oracle's answer holding grads (scaled by s) for p's case.
func answer(p *pending, s float64) *differential.WireResult {
	w := &differential.WireResult{Name: p.c.Name, Mode: "vjp in f64"}
	for _, o := range p.c.Graph.Outputs {
		w.Outputs = append(w.Outputs, differential.WireOf(o.Name, tensor.New(o.Type.DType, o.Type.Shape)))
	}
	for i, g := range p.grads {
		vals := g.Float64s()
		for k := range vals {
			vals[k] *= s
		}
		w.Grads = append(w.Grads, differential.WireOf(p.f.wrt[i], tensor.FromFloat64(g.DType, g.Shape, vals)))
	}
	return w
}

func TestOracleVerdicts(t *testing.T) {
	v := &Vs{Target: differential.Target{Device: "cpu"}}
	p := oracleCase(t, "div")
	for _, tc := range []struct {
		what   string
		w      *differential.WireResult
		reqErr error
		status string
		pass   bool
	}{
		{"the same gradient", answer(p, 1), nil, OraclePass, true},
		{"within f32's budget", answer(p, 1+1e-6), nil, OraclePass, true},
		{"1% off", answer(p, 1.01), nil, OracleFail, false},
		{"unsupported", &differential.WireResult{Name: p.c.Name, Unsupported: true, Error: "no mapping for op div"}, nil, OracleUnsupported, true},
		{"a failed case", &differential.WireResult{Name: p.c.Name, Error: "RuntimeError: boom"}, nil, OracleError, false},
		{"a failed request", nil, errs.New(errs.Timeout, "no answer"), OracleError, false},
	} {
		r := v.judge(p, tc.w, tc.reqErr)
		if r.Oracle == nil || r.Oracle.Status != tc.status || r.Pass != tc.pass {
			t.Errorf("%s: status %+v, pass %v; want %s, %v", tc.what, r.Oracle, r.Pass, tc.status, tc.pass)
			continue
		}
		if tc.status == OracleFail && (len(r.Oracle.Inputs) != 2 || !strings.Contains(r.Oracle.Inputs[0].Fail, "budget")) {
			t.Errorf("%s: inputs %+v", tc.what, r.Oracle.Inputs)
		}
		rows := Rows([]Result{r}, []string{"div"})
		var row Row
		for _, x := range rows {
			if x.DType == "f32" {
				row = x
			}
		}
		if row.Vs != tc.status || (row.Verdict == Fail) == tc.pass {
			t.Errorf("%s: row %+v", tc.what, row)
		}
	}
}

// A case whose graph has an fp8 intermediate goes to the oracle as its float64 graph.
func TestFP8IntermediateTravelsAsFloat64(t *testing.T) {
	b := graph.NewBuilder("fp8_chain")
	x := b.Input("x", numerics.F8E4M3, 5)
	b.Output(b.Op("mul", nil, b.Op("exp", nil, x), x))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := Case{Name: "fp8_chain", Op: "mul", DType: numerics.F8E4M3, Graph: g, Seed: 3,
		Inputs: map[string]*tensor.Tensor{"x": tensor.FromFloat64(numerics.F8E4M3, []int{5}, []float64{-1, -0.5, 0, 0.25, 1})}}
	p, widened, err := prepareVJP(c, feedOf(c))
	if err != nil || !widened {
		t.Fatalf("widened %v, err %v", widened, err)
	}
	for _, in := range p.Case.Inputs {
		if in.DType != "f64" {
			t.Errorf("input %s travels as %s", in.Name, in.DType)
		}
	}
}

func TestMeshRowsSayThereIsNoComparison(t *testing.T) {
	r := Result{Name: "all_reduce/f32/x", Op: "all_reduce", DType: "f32", Pass: true,
		Oracle: &OracleVerdict{Framework: "torch", Status: OracleNA, Note: MeshNote}}
	for _, row := range Rows([]Result{r}, []string{"all_reduce"}) {
		if row.DType == "f32" && (row.Vs != OracleNA || row.VsReason != MeshNote || row.Verdict != Pass) {
			t.Errorf("row %+v", row)
		}
	}
}
