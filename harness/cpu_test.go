package harness

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/backendtest"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// End to end on the real engine: compiler, CPU backend, golden model.

func TestRunCaseOnCPU(t *testing.T) {
	cpu := backendtest.CPU(t)
	for _, dt := range []numerics.DType{numerics.F32, numerics.F16, numerics.BF16} {
		const m, k, n = 16, 64, 24
		b := graph.NewBuilder("mlp")
		x := b.Input("x", dt, m, k)
		w := b.Input("w", dt, k, n)
		h := b.Named("h", "matmul", nil, x, w)
		b.Output(h, b.Named("p", "softmax", nil, b.Op("relu", nil, h)))
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		in, err := RandomInputs(g, 21, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := Case{Suite: "unit", Name: "mlp/" + dt.String(), Graph: g, Inputs: in, Seed: 21,
			Tolerances: []Tolerance{DefaultTolerance(dt).ForReduction(k), DefaultTolerance(dt).ForReduction(n)}}
		r := Runner{Backend: cpu, ArtifactsDir: t.TempDir()}.Run(c)
		if r.Verdict != VerdictPass {
			t.Errorf("%s: %s %s (replay %s)", dt, r.Verdict, r.Reason, r.Replay)
			continue
		}
		if r.Env.Determinism != DeterminismBitwise || !strings.HasPrefix(r.DeviceClass, "cpu/") || r.ScheduleHash == "" {
			t.Errorf("%s: env %+v schedule %q", dt, r.Env, r.ScheduleHash)
		}
		// The determinism contract: a second run gives the same bits.
		c.ExpectDigests = []string{r.Outputs[0].Digest, r.Outputs[1].Digest}
		if again := RunCase(c, cpu); again.Verdict != VerdictPass {
			t.Errorf("%s: second run differs: %s", dt, again.Reason)
		}
	}
}

func TestReplayOnCPU(t *testing.T) {
	cpu := backendtest.CPU(t)
	c := testCase(t)
	// An absurdly tight tolerance makes a correct run fail, which gives a real manifest.
	c.Tolerances = []Tolerance{{RTol: 0, ATol: 0, Budget: 0}}
	r := Runner{Backend: cpu, ArtifactsDir: t.TempDir()}.Run(c)
	if r.Verdict == VerdictPass {
		t.Skip("the cpu backend matched the f64 golden model bit for bit; no failure to replay")
	}
	if r.Replay == "" {
		t.Fatalf("no manifest for %s: %s", r.Verdict, r.Reason)
	}
	m, err := LoadManifest(r.Replay)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Replay(m)
	if err != nil {
		t.Fatal(err)
	}
	if again.Verdict != VerdictFail || again.Digest != r.Digest || again.ScheduleHash != r.ScheduleHash {
		t.Errorf("replay: %s digest %s schedule %s; original digest %s schedule %s",
			again.Verdict, again.Digest, again.ScheduleHash, r.Digest, r.ScheduleHash)
	}
	// With the tolerance the case deserves, the same manifest passes.
	m.Tolerances = []Tolerance{DefaultTolerance(numerics.F32).ForReduction(8)}
	if fixed, err := Replay(m); err != nil || fixed.Verdict != VerdictPass {
		t.Errorf("replay with the default tolerance: %v %s %s", err, fixed.Verdict, fixed.Reason)
	}
}
