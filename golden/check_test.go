package golden

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// fakeBackend runs a program's graph on the golden model, optionally spoiling the result, so
// CheckSpec can be tested without depending on a real backend's correctness.
type fakeBackend struct {
	name    string
	avail   error
	spoil   func(outs []*tensor.Tensor)
	explode bool
}

func (f *fakeBackend) Name() string        { return f.name }
func (f *fakeBackend) Available() error    { return f.avail }
func (f *fakeBackend) Device() string      { return "fake" }
func (f *fakeBackend) DeviceClass() string { return "fake/" + f.name }
func (f *fakeBackend) Run(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	if f.explode {
		panic("kaboom")
	}
	outs, err := ref.Run(p.Graph, in)
	if err == nil && f.spoil != nil {
		f.spoil(outs)
	}
	return outs, err
}

func loadCase(t *testing.T, op string, dt numerics.DType, i int) GoldenCase {
	t.Helper()
	f, err := Load(Data(), op, dt)
	if err != nil {
		t.Fatal(err)
	}
	return f.Cases[i]
}

func TestCheckSpecVerdicts(t *testing.T) {
	c := loadCase(t, "matmul", numerics.BF16, 1)
	r := CheckSpec(c, &fakeBackend{name: "exact"})
	if r.Verdict != harness.VerdictPass || r.Digest == "" || r.ScheduleHash == "" || len(r.Outputs) != 1 || len(r.InputDigests) != 2 {
		t.Fatalf("exact backend: verdict %s (%s), digest %q, schedule %q, %d outputs", r.Verdict, r.Reason, r.Digest, r.ScheduleHash, len(r.Outputs))
	}
	if r.Outputs[0].Digest != c.Want[0].Digest() || r.Suite != Suite || r.Case != c.Name || r.Backend != "exact" {
		t.Errorf("result fields: %+v", r)
	}

	// One element off by far more than the tolerance is a failure naming the golden file.
	r = CheckSpec(c, &fakeBackend{name: "off", spoil: func(o []*tensor.Tensor) { o[0].SetFloat64(7, o[0].Float64(7)+1) }})
	if r.Verdict != harness.VerdictFail || !strings.Contains(r.Reason, "golden/data/matmul/bf16.golden") || r.Outputs[0].Check.Mismatches != 1 {
		t.Errorf("spoiled element: verdict %s, reason %q", r.Verdict, r.Reason)
	}

	r = CheckSpec(c, &fakeBackend{name: "zeros", spoil: func(o []*tensor.Tensor) { clear(o[0].Data) }})
	if r.Verdict != harness.VerdictFail {
		t.Errorf("all-zero output: verdict %s", r.Verdict)
	}

	r = CheckSpec(c, &fakeBackend{name: "gpu", avail: errs.New(errs.NoDevice, "no CUDA driver")})
	if r.Verdict != harness.VerdictSkip || r.ErrorCode != string(errs.NoDevice) || !strings.Contains(r.Reason, "no CUDA driver") {
		t.Errorf("unavailable backend: verdict %s, code %s, reason %q", r.Verdict, r.ErrorCode, r.Reason)
	}

	r = CheckSpec(c, &fakeBackend{name: "boom", explode: true})
	if r.Verdict != harness.VerdictError || r.ErrorCode != string(errs.Internal) || !strings.Contains(r.Reason, "panic during run") {
		t.Errorf("panicking backend: verdict %s, code %s, reason %q", r.Verdict, r.ErrorCode, r.Reason)
	}

	r = CheckProgram(c, nil, &fakeBackend{name: "exact"})
	if r.Verdict != harness.VerdictError {
		t.Errorf("nil program: verdict %s", r.Verdict)
	}
}

func TestCheckSpecCatchesAModifiedInput(t *testing.T) {
	c := loadCase(t, "add", numerics.F32, 1)
	r := CheckSpec(c, &fakeBackend{name: "scribbler", spoil: func([]*tensor.Tensor) { c.Inputs["a"].Data[0] ^= 1 }})
	if r.Verdict != harness.VerdictFail || !strings.Contains(r.Reason, "backend modified input %a") {
		t.Errorf("verdict %s, reason %q", r.Verdict, r.Reason)
	}
}

func TestRunDigestsIsStable(t *testing.T) {
	s := SpecsFor("softmax", numerics.F16)[2]
	b := &fakeBackend{name: "exact"}
	d1, err := RunDigests(s, b)
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := RunDigests(s, b)
	if len(d1) != 1 || d1[0] != d2[0] || d1[0] == harness.NilDigest {
		t.Errorf("digests %v then %v", d1, d2)
	}
	if _, err := RunDigests(s, &fakeBackend{name: "boom", explode: true}); err == nil || errs.CodeOf(err) != errs.Internal {
		t.Errorf("panicking backend: %v", err)
	}
}

func TestCheckReference(t *testing.T) {
	c := loadCase(t, "layernorm", numerics.F32, 2)
	if r := CheckReference(c); r.Verdict != harness.VerdictPass || r.Backend != "ref" {
		t.Fatalf("stored case against the golden model: %s %s", r.Verdict, r.Reason)
	}
	// A drifted model looks like different stored outputs.
	c.Want[0] = c.Want[0].Clone()
	c.Want[0].SetFloat64(0, c.Want[0].Float64(0)*1.01)
	if r := CheckReference(c); r.Verdict != harness.VerdictFail {
		t.Errorf("moved expected output: verdict %s", r.Verdict)
	}
}
