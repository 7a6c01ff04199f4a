//go:build failpoints

package usercheck

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/harness"
)

// A planted wrong result: the compiler makes matmuls accumulate in bf16 instead of f32.
// (compiler/elementwise/gelu-approx-swapped is not caught on this graph: after softmax its
// error, 1.4e-5 at seed 5, is inside the random-graph tolerance policy.) The golden row must fail with a manifest whose replay fails while the fault is on
// and passes once it is off; the rows that compare the engine with itself must still pass.
func TestAPlantedWrongResultFailsTheRightRowsAndReplays(t *testing.T) {
	fault := failpoint.MatmulAccumBF16
	if err := failpoint.Activate(fault); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Activate() })
	exe, env := self(t)
	rep, err := Run(Options{Graph: mlp(t), Seed: 5, Backends: cpu(t), Oracle: OracleNone, Self: exe,
		SelfEnv: append(env, failpoint.EnvVar+"="+fault), Artifacts: t.TempDir(), MetaChecks: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Failed() {
		t.Fatal("the planted fault went unnoticed")
	}
	m := rows(rep)
	golden := m["golden@cpu"]
	if golden.Verdict != harness.VerdictFail || golden.Replay == "" {
		t.Fatalf("golden row: %s %q replay=%q", golden.Verdict, golden.Reason, golden.Replay)
	}
	for _, same := range []string{"verify@", "compile@", "run@cpu", "determinism/in-process@cpu", "determinism/process@cpu",
		"metamorphic/softmax-shift@cpu", "metamorphic/transpose-product@cpu", "metamorphic/cast-round-trip@cpu"} {
		if r := m[same]; r.Verdict != harness.VerdictPass {
			t.Errorf("%s should pass under a deterministic wrong lowering: %s %q", same, r.Verdict, r.Reason)
		}
	}
	if g := m["gradients@cpu"]; g.Verdict != harness.VerdictFail || g.Replay == "" {
		t.Errorf("gradients row: %s %q: the backward's matmuls accumulate in bf16 too", g.Verdict, g.Reason)
	}
	man, err := harness.LoadManifest(golden.Replay)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := harness.Replay(man); err != nil || r.Verdict != harness.VerdictFail {
		t.Fatalf("replay with the fault on: %v %s %q", err, r.Verdict, r.Reason)
	}
	failpoint.Activate()
	if r, err := harness.Replay(man); err != nil || r.Verdict != harness.VerdictPass {
		t.Fatalf("replay with the fault off: %v %s %q", err, r.Verdict, r.Reason)
	}
}

// all_to_all's chunks from ranks 0 and 1 swapped: the pencil FFT's sharded row fails while
// the rows that run on one device pass.
func TestSwappedAllToAllChunksFailTheShardedRow(t *testing.T) {
	if err := failpoint.Activate(failpoint.DistAllToAllChunksSwapped); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Activate() })
	g, err := graph.ParseFile("../docs/examples/fft2.tg")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(Options{Graph: g, Seed: 3, Backends: cpu(t), Oracle: OracleNone, Mesh: "sp=4",
		Layouts: map[string]string{"x": "[S(sp),R,R]"}})
	if err != nil {
		t.Fatal(err)
	}
	m := rows(rep)
	if r := m["sharded/sp=4@cpu"]; r.Verdict != harness.VerdictFail {
		t.Fatalf("sharded row: %s %q", r.Verdict, r.Reason)
	}
	if r := m["golden@cpu"]; r.Verdict != harness.VerdictPass {
		t.Errorf("golden row runs on one device and must pass: %s %q", r.Verdict, r.Reason)
	}
}
