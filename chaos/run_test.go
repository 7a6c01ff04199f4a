package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
)

// A real run on goroutine ranks: a corrupted frame is refused, the group restarts from its
// checkpoint and ends with the fault-free run's bits.
func TestInprocCorruptionRecovers(t *testing.T) {
	sc := &Scenario{Name: "t/corrupt", Transport: "inproc", World: 3, Steps: 30, CheckpointEvery: 5,
		CommTimeout: Duration(time.Second), Faults: []Injection{{Fault: &Corrupt{}, Rank: 1, Step: 12}}}
	rep, err := Execute(context.Background(), sc, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Table())
	if !rep.Passed || rep.Restarts != 1 || !rep.BitsIdentical || rep.Faults[0].DetectedBy != "E_DESYNC" || rep.LostSteps != 2 {
		t.Fatalf("%+v", rep)
	}
	for _, f := range []string{HistoryFile, "report.json", "scenario.json", "reference.json"} {
		if _, err := os.Stat(filepath.Join(rep.Dir, f)); err != nil {
			t.Errorf("artifact %s: %v", f, err)
		}
	}
	if _, err := Execute(context.Background(), sc, Options{Dir: rep.Dir}); err == nil || !strings.Contains(err.Error(), "already holds a run") {
		t.Errorf("a reused artifacts folder: %v", err)
	}
}

// The planted bug, for real: corrupted frames keep a valid checksum, as a receiver that
// accepted a bad checksum would see them. Nothing detects it, the corruption reaches the
// parameters, and the checker says so.
//
// The first frame after step 12 carries a chunk of step 13's one gradient bucket (the loss and
// every gradient share one all_reduce): whichever peer it goes to, it holds gradients, so the
// parameters change from step 13 on; whether step 13's loss does depends on which chunk it is
// (the loss leads the bucket), so the first silent step is 13 or 14.
func TestPlantedBadChecksumIsCaught(t *testing.T) {
	for _, tc := range []struct {
		skip int
		want []string
	}{
		{0, []string{"silent corruption: attempt 0, rank 0, step 1", "final parameters", "never detected"}},
	} {
		sc := &Scenario{Name: "t/plant", Transport: "inproc", World: 3, Steps: 30, CheckpointEvery: 5,
			CommTimeout: Duration(time.Second), Plant: PlantAcceptBadChecksum,
			Faults: []Injection{{Fault: &Corrupt{Skip: tc.skip}, Rank: 1, Step: 12}}}
		rep, err := Execute(context.Background(), sc, Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s", rep.Table())
		if rep.Passed || rep.Faults[0].Outcome != "NOT DETECTED" {
			t.Fatalf("the planted bug went unnoticed: %+v", rep)
		}
		all := strings.Join(rep.Violations, "\n")
		for _, want := range tc.want {
			if !strings.Contains(all, want) {
				t.Errorf("skip %d: no violation says %q:\n%s", tc.skip, want, all)
			}
		}
	}
}

func TestHistoryMergesWritersOnOneClock(t *testing.T) {
	dir := t.TempDir()
	a, _ := NewRecorder(filepath.Join(dir, "history-a.jsonl"))
	b, _ := NewRecorder(filepath.Join(dir, "history-b.jsonl"))
	t0 := time.Now()
	a.Record(Event{T: t0.Add(2), Kind: KindStep, Step: 2})
	b.Record(Event{T: t0.Add(1), Kind: KindStep, Step: 1})
	a.Record(Event{T: t0.Add(3), Kind: KindStep, Step: 3})
	a.Close()
	b.Close()
	// A writer killed mid-line leaves a torn last line: skipped.
	f, _ := os.OpenFile(filepath.Join(dir, "history-b.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"t":"2026-`)
	f.Close()
	evs, err := ReadHistory(dir)
	if err != nil || len(evs) != 3 || evs[0].Step != 1 || evs[1].Step != 2 || evs[2].Step != 3 {
		t.Fatalf("%v %+v", err, evs)
	}
}
