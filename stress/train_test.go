package stress

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Training jobs under load give the bits each training run gave alone.
func TestTrainWorkloadCleanRunPasses(t *testing.T) {
	rep, err := Run(context.Background(), Options{Mode: ModeGoroutines, Jobs: 2, Backend: cpu(t), Duration: 3 * time.Second,
		Seed: 1, PerJob: 2, Reps: 2, Interval: 50 * time.Millisecond, OutDir: t.TempDir(), Workload: WorkloadTrain})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pass || rep.Graphs < 4 || rep.Mismatches != 0 {
		t.Fatalf("training workload: pass %v, runs %d, mismatches %d, failures %v", rep.Pass, rep.Graphs, rep.Mismatches, rep.Failures)
	}
}

// A training run whose digest differs from its alone digest is a mismatch naming the replay.
func TestTrainWorkloadCatchesADifferentDigest(t *testing.T) {
	b := cpu(t)
	p, err := MakeTrainPlan(context.Background(), b, 4, 1, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.Workload != WorkloadTrain || len(p.Jobs[0]) != 1 || p.Jobs[0][0].Digest == "" {
		t.Fatalf("plan %+v", p)
	}
	d := []byte(p.Jobs[0][0].Digest)
	d[0] ^= 1 // as if the alone run had given other bits
	p.Jobs[0][0].Digest = string(d)
	var got []Event
	err = RunJob(context.Background(), JobOptions{Plan: p, Job: 0, Backend: b, Until: time.Now().Add(300 * time.Millisecond),
		Emit: func(e Event) { got = append(got, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0].Code != string(errs.Nondeterministic) || got[0].Verdict != "fail" {
		t.Fatalf("events %+v", got)
	}
}

func TestTrainWorkloadRefusesPressure(t *testing.T) {
	_, err := Run(context.Background(), Options{Mode: ModeProcesses, Jobs: 1, Backend: cpu(t), Duration: time.Second, OutDir: t.TempDir(),
		Workload: WorkloadTrain, Pressure: PressureOOM, Command: testCommand})
	if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "without pressure") {
		t.Fatalf("got %v", err)
	}
}
