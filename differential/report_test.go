package differential

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

func outcome(op string, dt numerics.DType, verdict, reason string, maxAbs float64, ulp uint64) Outcome {
	r := harness.Result{Case: op + "/" + dt.String() + "/x", Verdict: verdict, Reason: reason,
		Outputs: []harness.OutputResult{{Check: harness.CheckResult{MaxAbs: maxAbs, MaxULP: ulp}}}}
	return Outcome{Op: op, DType: dt, Mode: "native", Result: r}
}

func TestSummarizeOneRowPerOpAndDType(t *testing.T) {
	os := []Outcome{
		outcome("exp", numerics.F32, harness.VerdictPass, "", 1e-7, 1),
		outcome("exp", numerics.F32, harness.VerdictFail, "off by far", 3, 9),
		outcome("exp", numerics.F16, harness.VerdictSkip, "unsupported by oracle: no f16", 0, 0),
		outcome("exp", numerics.BF16, harness.VerdictError, "E_TIMEOUT: slow", 0, 0),
		outcome("exp", numerics.F64, harness.VerdictPass, "", 0, 0),
	}
	rows := Summarize([]string{"exp"}, os)
	def, _ := graph.Lookup("exp")
	if len(rows) != len(def.DTypes) {
		t.Fatalf("%d rows, exp accepts %d dtypes", len(rows), len(def.DTypes))
	}
	byDT := map[string]Row{}
	for _, r := range rows {
		byDT[r.DType] = r
	}
	if r := byDT["f32"]; r.Verdict != RowFail || r.MaxAbs != 3 || r.MaxULP != 9 || r.Passed != 1 || r.Failed != 1 || !strings.Contains(r.Reason, "off by far") {
		t.Errorf("f32 row %+v", r)
	}
	if r := byDT["f16"]; r.Verdict != RowUnsupported || !r.OK() || !strings.Contains(r.Reason, "unsupported by oracle") {
		t.Errorf("f16 row %+v", r)
	}
	if r := byDT["bf16"]; r.Verdict != RowError || r.OK() {
		t.Errorf("bf16 row %+v", r)
	}
	if r := byDT["fp8e4m3"]; r.Verdict != RowNoCases || r.OK() {
		t.Errorf("a dtype without cases must not pass: %+v", r)
	}
	if r := byDT["f64"]; r.Verdict != RowPass || r.Mode != "native" {
		t.Errorf("f64 row %+v", r)
	}
	if RowsOK(rows) {
		t.Error("rows with a failure count as OK")
	}
	if all := Summarize(nil, nil); len(all) != len(pairs()) {
		t.Errorf("%d rows for the whole registry, want %d", len(all), len(pairs()))
	}
}

func pairs() []string {
	var out []string
	for _, d := range graph.Ops() {
		for _, dt := range d.DTypes {
			out = append(out, d.Name+"/"+dt.String())
		}
	}
	return out
}

// Every registry op has a mapping row and an entry in each oracle script's OPS table, and
// nothing else does (but the ops AheadOfRegistry): a new op cannot reach the differential
// report unmapped.
func TestEveryOpIsMappedInTableAndScripts(t *testing.T) {
	var reg []string
	for _, d := range graph.Ops() {
		reg = append(reg, d.Name)
	}
	// The ops the table and the scripts map ahead of the registry (the core tree adds them).
	for _, op := range AheadOfRegistry {
		if !slices.Contains(reg, op) {
			reg = append(reg, op)
		}
	}
	slices.Sort(reg)
	var table []string
	for _, m := range AllMappings() {
		table = append(table, m.Op)
		if m.Torch == "" || m.JAX == "" {
			t.Errorf("mapping of %s names no torch or jax call", m.Op)
		}
	}
	slices.Sort(table)
	if !slices.Equal(table, reg) {
		t.Errorf("Mapping lists %v, registry and AheadOfRegistry have %v", table, reg)
	}
	for _, m := range Mapping {
		if _, ok := graph.Lookup(m.Op); !ok {
			t.Errorf("Mapping lists %s, which the registry lacks", m.Op)
		}
	}
	key := regexp.MustCompile(`"(\w+)":`)
	for _, script := range Frameworks {
		src, err := Script(script)
		if err != nil {
			t.Fatal(err)
		}
		s := string(src)
		i := strings.Index(s, "\nOPS = {")
		if i < 0 {
			t.Fatalf("%s has no OPS table", script)
		}
		body := s[i : i+strings.Index(s[i:], "\n}\n")]
		var ops []string
		for _, m := range key.FindAllStringSubmatch(body, -1) {
			ops = append(ops, m[1])
		}
		slices.Sort(ops)
		if !slices.Equal(ops, reg) {
			t.Errorf("%s OPS lists %v, registry has %v", script, ops, reg)
		}
	}
}
