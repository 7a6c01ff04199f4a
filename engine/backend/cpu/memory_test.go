package cpu

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "64MiB": 64 << 20, "512KiB": 512 << 10, "2GiB": 2 << 30} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1MB", "lots", "9999999999999GiB"} {
		if _, err := ParseBytes(in); errs.CodeOf(err) != errs.Input {
			t.Errorf("ParseBytes(%q) = %v, want E_INPUT", in, err)
		}
	}
}

// A run that does not fit the budget is E_OOM naming the graph and the variable; once the
// memory that filled the budget is freed, the same run succeeds with the same values, and
// nothing stays counted.
func TestBudgetRefusesRunsWithOOMAndRecovers(t *testing.T) {
	_, p := compile(t, "budget", func(b *graph.Builder) {
		x := b.Input("x", numerics.F32, 1024)
		b.Output(b.Op("relu", nil, x))
	})
	prev := SetMemLimit(1 << 20)
	t.Cleanup(func() { SetMemLimit(prev) })
	base := MemInUse()
	in := map[string]*tensor.Tensor{"x": tensor.FromFloat64(numerics.F32, []int{1024}, make([]float64, 1024))}
	in["x"].SetFloat64(3, -2)
	in["x"].SetFloat64(5, 7)
	if _, err := (&Backend{}).Run(p, in); err != nil {
		t.Fatalf("run inside the budget: %v", err)
	}
	need := runBytes(p)
	hog, err := Alloc(int(MemLimit() - base - need + 1)) // one byte too few left for the run
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Alloc(int(need)); errs.CodeOf(err) != errs.OOM {
		t.Fatalf("alloc past the budget: %v, want E_OOM", err)
	}
	_, err = (&Backend{}).Run(p, in)
	if errs.CodeOf(err) != errs.OOM || !strings.Contains(err.Error(), "run of graph "+p.Graph.Name) || !strings.Contains(err.Error(), EnvMemLimit) {
		t.Fatalf("run past the budget: %v, want E_OOM naming the graph and %s", err, EnvMemLimit)
	}
	hog.Free()
	hog.Free() // a second free gives nothing back twice
	outs, err := (&Backend{}).Run(p, in)
	if err != nil {
		t.Fatalf("run after the hog freed: %v", err)
	}
	wantValues(t, "relu[3]", tensor.FromFloat64(numerics.F32, []int{1}, []float64{outs[0].Float64(3)}), 0)
	wantValues(t, "relu[5]", tensor.FromFloat64(numerics.F32, []int{1}, []float64{outs[0].Float64(5)}), 7)
	if MemInUse() != base {
		t.Fatalf("%d bytes counted after every run and block ended, want %d", MemInUse(), base)
	}
}
