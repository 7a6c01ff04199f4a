package mutate

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	fp "github.com/tessera-qa/tessera-qa/engine/failpoint"
)

func sampleReport() *Report {
	pick := func(name string) Suite {
		s, _ := SelectSuites([]string{name})
		return s[0]
	}
	g, d := pick("golden"), pick("determinism")
	faults := Catalogue()[:2]
	return &Report{
		Suites:   []SuiteReport{{Suite: g}, {Suite: d}, {Suite: pick("property"), Missing: "suites/property is not in this tree"}},
		Baseline: []Outcome{{Suite: "golden", Verdict: Passed}, {Suite: "determinism", Verdict: Passed}},
		Bits:     BitsCheck{Specs: 734, Differ: []string{}},
		Faults: []FaultReport{
			{Fault: faults[0], CaughtBy: []string{"golden"}, Outcomes: []Outcome{
				{Suite: "golden", Verdict: Caught, Detail: "matmul/f32/67x45x97: got NaN | want 1 <x>"},
				{Suite: "determinism", Verdict: Missed}, {Suite: "property", Verdict: Skipped}}},
			{Fault: faults[1], CaughtBy: []string{}, Outcomes: []Outcome{
				{Suite: "golden", Verdict: Missed}, {Suite: "determinism", Verdict: NotRun}, {Suite: "property", Verdict: Skipped}}},
		},
	}
}

func TestReportVerdict(t *testing.T) {
	r := sampleReport()
	if r.OK() || strings.Join(r.Uncaught(), ",") != fp.MatmulAccumBF16 {
		t.Errorf("OK %v, uncaught %v: want not OK, %s uncaught", r.OK(), r.Uncaught(), fp.MatmulAccumBF16)
	}
	r.Faults = r.Faults[:1]
	if !r.OK() {
		t.Error("every fault caught, baseline clean, bits equal: want OK")
	}
	r.Bits.NDiffer, r.Bits.Differ = 1, []string{"add/f32/1"}
	if r.OK() {
		t.Error("bits differ: want not OK")
	}
	r.Bits.NDiffer = 0
	r.Baseline[1].Verdict = Failed
	if r.OK() || len(r.BaselineFailures()) != 1 {
		t.Error("a suite fails with no fault on: want not OK")
	}
	if (&Report{Bits: BitsCheck{Specs: 1}}).OK() {
		t.Error("a report with no faults must not pass")
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	WriteTable(&b, sampleReport())
	out := b.String()
	for _, want := range []string{
		"FAULT                            GOLDEN  DETERMINISM  PROPERTY\n",
		"compiler/matmul/k-tail-unmasked  CAUGHT  -            skip\n",
		"compiler/matmul/accumulate-bf16  -       .            skip\n",
		"suite property: not run: suites/property is not in this tree\n",
		"no fault on: golden pass, determinism pass; bits: identical on all 734 golden specs\n",
		"NOT CAUGHT by any suite (1 of 2): compiler/matmul/accumulate-bf16\nFAIL\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	WriteMarkdown(&b, sampleReport())
	out := b.String()
	for _, want := range []string{
		"| fault | layer | golden | determinism | property |\n|---|---|:-:|:-:|:-:|\n",
		"| `compiler/matmul/k-tail-unmasked` | compiler | **caught** | missed | skip |\n",
		"### `compiler/matmul/accumulate-bf16`\n\nMatmuls accumulate in bf16",
		"- caught by golden: matmul/f32/67x45x97: got NaN \\| want 1 &lt;x&gt;\n",
		"- **caught by no suite**\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}

func TestRunRefusesWhatItCannotDo(t *testing.T) {
	ctx := context.Background()
	t.Run("fault list in the environment", func(t *testing.T) {
		t.Setenv(fp.EnvVar, fp.CPUReduceRightToLeft)
		if _, err := Run(ctx, Options{}); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), fp.EnvVar) {
			t.Errorf("Run with %s set: %v, want E_INPUT", fp.EnvVar, err)
		}
	})
	t.Run("unknown fault", func(t *testing.T) {
		if _, err := Run(ctx, Options{Faults: []string{"cpu/nope"}}); errs.CodeOf(err) != errs.Input {
			t.Errorf("Run with an unknown fault: %v, want E_INPUT", err)
		}
	})
	t.Run("no source tree", func(t *testing.T) {
		if _, err := FindRoot(t.TempDir()); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "--src") {
			t.Errorf("FindRoot outside the tree: %v, want E_INPUT pointing at --src", err)
		}
	})
	t.Run("no suite in the tree", func(t *testing.T) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+Module+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := FindRoot(filepath.Join(root)); err != nil || got != root {
			t.Fatalf("FindRoot = %q, %v", got, err)
		}
		if _, err := Run(ctx, Options{Root: root, Suites: []string{"property"}}); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "none of the selected suites") {
			t.Errorf("Run with no suite in the tree: %v, want E_INPUT", err)
		}
	})
}
