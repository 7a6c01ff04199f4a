package usercheck

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/parse"
)

func cpu(t *testing.T) []backend.Backend {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	return []backend.Backend{b}
}

// rows indexes a report by "check@backend".
func rows(rep *Report) map[string]harness.Result {
	m := map[string]harness.Result{}
	for _, r := range rep.Rows {
		m[CheckName(r)+"@"+r.Backend] = r
	}
	return m
}

func TestMLPPassesEveryCheckThatApplies(t *testing.T) {
	exe, env := self(t)
	rep, err := Run(Options{Graph: mlp(t), Seed: 7, Backends: cpu(t), Oracle: OracleNone, Self: exe, SelfEnv: env, Artifacts: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() || !rep.RandomInputs {
		t.Fatalf("failed=%v random=%v", rep.Failed(), rep.RandomInputs)
	}
	m := rows(rep)
	for _, want := range []string{"verify@", "compile@", "run@cpu", "golden@cpu", "determinism/in-process@cpu", "determinism/process@cpu",
		"gradients@cpu", "metamorphic/softmax-shift@cpu", "metamorphic/transpose-product@cpu", "metamorphic/cast-round-trip@cpu"} {
		if r, ok := m[want]; !ok || r.Verdict != harness.VerdictPass {
			t.Errorf("%s: %+v", want, r.Verdict+" "+r.Reason)
		}
	}
	for _, want := range []string{"sharded@cpu", "differential@", "determinism/backends@"} {
		if r := m[want]; r.Verdict != harness.VerdictSkip || r.Reason == "" {
			t.Errorf("%s: want a skip with its reason, got %q %q", want, r.Verdict, r.Reason)
		}
	}
	// norm-scale covers layernorm/rmsnorm, which mlp does not use.
	if _, ok := m["metamorphic/norm-scale@cpu"]; ok {
		t.Error("a relation of ops the graph does not use ran")
	}
}

func TestASecondProcessWithOtherBitsFailsWithAManifest(t *testing.T) {
	exe, env := self(t)
	dir := t.TempDir()
	rep, err := Run(Options{Graph: mlp(t), Seed: 1, Backends: cpu(t), Oracle: OracleNone, Self: exe, SelfEnv: append(env, flipEnv+"=1"), Artifacts: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := rows(rep)["determinism/process@cpu"]
	if r.Verdict != harness.VerdictFail || r.ErrorCode != string(errs.Nondeterministic) || r.Replay == "" {
		t.Fatalf("got %s %s %q replay=%q", r.Verdict, r.ErrorCode, r.Reason, r.Replay)
	}
	// The manifest expects the second process's digests: in this process the replay differs.
	m, err := harness.LoadManifest(r.Replay)
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != harness.KindDigest {
		t.Fatalf("manifest kind %s", m.Kind)
	}
	res, err := harness.Replay(m)
	if err != nil || !res.Failed() {
		t.Fatalf("replay: %v %s", err, res.Verdict)
	}
	if rows(rep)["golden@cpu"].Verdict != harness.VerdictPass {
		t.Error("golden row should still pass")
	}
}

func TestMeshRowAgreesWithOneDevice(t *testing.T) {
	rep, err := Run(Options{Graph: mlp(t), Seed: 3, Backends: cpu(t), Oracle: OracleNone, Mesh: "tp=2",
		Layouts: map[string]string{"w1": "col:tp", "b1": "col:tp", "w2": "row:tp"}})
	if err != nil {
		t.Fatal(err)
	}
	r := rows(rep)["sharded/tp=2@cpu"]
	if r.Verdict != harness.VerdictPass || !strings.Contains(r.Reason, "2 ranks") {
		t.Fatalf("got %s %q", r.Verdict, r.Reason)
	}
	if rows(rep)["determinism/process@cpu"].Verdict != harness.VerdictSkip {
		t.Error("without Self the second process must skip")
	}
}

func TestGivenInputsAreUsedAndBadOnesAreInputErrors(t *testing.T) {
	g := mlp(t)
	in, err := harness.RandomInputs(g, 99, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(Options{Graph: g, Inputs: in, Backends: cpu(t), Oracle: OracleNone, MetaChecks: 2})
	if err != nil || rep.RandomInputs {
		t.Fatalf("err %v random %v", err, rep.RandomInputs)
	}
	if got, want := rows(rep)["run@cpu"].InputDigests["x"], in["x"].Digest(); got != want {
		t.Errorf("input digest %s, want %s", got, want)
	}
	delete(in, "x")
	if _, err := Run(Options{Graph: g, Inputs: in, Backends: cpu(t), Oracle: OracleNone}); errs.CodeOf(err) != errs.Input {
		t.Errorf("missing input: %v", err)
	}
	if _, err := Run(Options{Graph: g, Oracle: "numpy"}); errs.CodeOf(err) != errs.Input {
		t.Errorf("bad oracle: %v", err)
	}
}

func TestUnmappedOpSkipsTheOracleNamingIt(t *testing.T) {
	g, err := graph.Parse("graph u {\n input %x: f32[4]\n %y = neg(%x)\n output %y\n}\n", "u.tg")
	if err != nil {
		t.Fatal(err)
	}
	g.Nodes[0].Op = "no_such_op_for_the_oracle"
	if op := unmapped(g, "torch"); op != "no_such_op_for_the_oracle" {
		t.Errorf("unmapped = %q", op)
	}
	g.Nodes[0].Op = "neg"
	if op := unmapped(g, "torch"); op != "" {
		t.Errorf("neg maps, got %q", op)
	}
}

// The rows are harness results: the reporter ingests them as they are, one row each.
func TestRowsAreAResultsFileTheReporterReads(t *testing.T) {
	rep, err := Run(Options{Graph: mlp(t), Seed: 2, Backends: cpu(t), Oracle: OracleNone, MetaChecks: 2})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(rep.Rows)
	if err != nil {
		t.Fatal(err)
	}
	p, err := parse.Parse("check.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != "results" || p.Batch.Rows() != len(rep.Rows) {
		t.Fatalf("kind %s, %d rows for %d", p.Kind, p.Batch.Rows(), len(rep.Rows))
	}
}

// With torch installed the oracle row compares the engine with torch; without it, auto is a
// skip with the reason and a named oracle is E_NO_DEVICE ($TESSERA_QA_PYTHON asks for it: then
// a missing torch fails this test).
func TestTorchOracleRow(t *testing.T) {
	rep, err := Run(Options{Graph: mlp(t), Seed: 4, Backends: cpu(t), Oracle: OracleAuto, MetaChecks: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := rows(rep)["differential/torch@cpu"]
	if r.Verdict == "" {
		s := rows(rep)["differential/torch@"]
		if s.Verdict != harness.VerdictSkip || !strings.Contains(s.Reason, "cannot start") {
			t.Fatalf("no oracle row and no skip: %+v", s)
		}
		if os.Getenv(differential.PythonEnv) != "" {
			t.Fatalf("$%s is set but torch did not start: %s", differential.PythonEnv, s.Reason)
		}
		if _, err := Run(Options{Graph: mlp(t), Backends: cpu(t), Oracle: "torch"}); errs.CodeOf(err) != errs.NoDevice {
			t.Errorf("named oracle missing: %v", err)
		}
		t.Skip(s.Reason)
	}
	if r.Verdict != harness.VerdictPass {
		t.Fatalf("%s %q", r.Verdict, r.Reason)
	}
}

// The pencil 2-D FFT (docs/examples/fft2.tg) over 4 ranks: its collectives only move data, so
// the row demands the one-device bits, not only agreement within tolerance.
func TestMeshRowOfThePencilFFTDemandsTheOneDeviceBits(t *testing.T) {
	g, err := graph.ParseFile("../docs/examples/fft2.tg")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(Options{Graph: g, Seed: 3, Backends: cpu(t), Oracle: OracleNone, Mesh: "sp=4",
		Layouts: map[string]string{"x": "[S(sp),R,R]"}})
	if err != nil {
		t.Fatal(err)
	}
	r := rows(rep)["sharded/sp=4@cpu"]
	if r.Verdict != harness.VerdictPass || !strings.Contains(r.Reason, "one-device run's bits") || !strings.Contains(r.Reason, "all_to_all:sp") {
		t.Fatalf("got %s %q", r.Verdict, r.Reason)
	}
}
