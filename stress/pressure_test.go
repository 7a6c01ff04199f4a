package stress

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/autotune"
	cpubackend "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

func runPressure(t *testing.T, mode, pressure string, jobs int, d time.Duration) *Report {
	t.Helper()
	out := t.TempDir()
	rep, err := Run(context.Background(), Options{Mode: mode, Jobs: jobs, Backend: cpu(t), Duration: d, Seed: 1,
		PerJob: 3, Reps: 2, Interval: 50 * time.Millisecond, OutDir: out, Command: testCommand, Pressure: pressure})
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.MarshalIndent(rep, "", " ")
	t.Logf("%s", js)
	return rep
}

// The hog fills the budget the jobs share (goroutines mode) until E_OOM, round after round:
// every round is refused with E_OOM and recovers, no job's bits change, and the budget is
// back to what it was.
func TestOOMPressureGoroutinesRecovers(t *testing.T) {
	before := cpubackend.MemLimit()
	rep := runPressure(t, ModeGoroutines, PressureOOM, 2, 3*time.Second)
	o := rep.OOM
	if !rep.Pass || o == nil || o.Rounds < 2 || o.Recoveries != o.Rounds || rep.Mismatches != 0 || o.HeldMaxBytes < DefaultCPUBudget/2 {
		t.Fatalf("oom pressure: pass %v, %+v, failures %v", rep.Pass, o, rep.Failures)
	}
	if cpubackend.MemLimit() != before || cpubackend.MemInUse() != 0 {
		t.Fatalf("budget %d, %d bytes in use after the run; want %d and 0", cpubackend.MemLimit(), cpubackend.MemInUse(), before)
	}
}

func TestOOMPressureProcessesRecovers(t *testing.T) {
	rep := runPressure(t, ModeProcesses, PressureOOM, 2, 3*time.Second)
	o := rep.OOM
	if !rep.Pass || o == nil || o.Rounds < 2 || o.Recoveries != o.Rounds || o.UnderOOM == 0 {
		t.Fatalf("oom pressure: pass %v, %+v, failures %v", rep.Pass, o, rep.Failures)
	}
	var hog bool
	for _, m := range rep.Monitors {
		hog = hog || m.Source == "hog"
	}
	if !hog {
		t.Fatal("the hog process's monitors are not in the report")
	}
}

// Three processes hammer one cache while the runner corrupts it halfway: the corruption is
// detected once and kept aside, nothing stored after it is lost, the final file verifies.
func TestCachePressureDetectsCorruptionAndLosesNothing(t *testing.T) {
	rep := runPressure(t, ModeProcesses, PressureCache, 3, 3*time.Second)
	c := rep.Cache
	if !rep.Pass || c == nil || c.Stores < 30 || c.Lookups < 30 || c.Lost != 0 || c.Wrong != 0 || len(c.Injected) != 1 || c.Detected != 1 || !c.KeptAside || !c.FinalOK {
		t.Fatalf("cache pressure: pass %v, %+v, failures %v", rep.Pass, c, rep.Failures)
	}
	if !strings.HasPrefix(c.JIT, "skipped: ") {
		t.Fatalf("jit on the cpu: %q", c.JIT)
	}
}

func TestPressureUsage(t *testing.T) {
	for _, o := range []Options{{Mode: ModeGoroutines, Pressure: PressureCache}, {Mode: ModeProcesses, Pressure: "disk"}} {
		o.Jobs, o.Duration, o.Backend, o.OutDir, o.Command = 1, time.Second, cpu(t), t.TempDir(), testCommand
		if _, err := Run(context.Background(), o); errs.CodeOf(err) != errs.Input {
			t.Errorf("%s/%s: %v, want E_INPUT", o.Mode, o.Pressure, err)
		}
	}
}

// The planted lost write: the cache updated without its lock. Files stay whole and
// checksummed; only the hammer's history shows entries lost.
func TestCacheHammerCatchesUnlockedUpdates(t *testing.T) {
	if !failpoint.Compiled {
		t.Skip("needs a failpoints build: go test -tags failpoints ./stress")
	}
	t.Setenv(failpoint.EnvVar, failpoint.AutotuneCacheUnlocked) // read by the hammer processes at start-up
	rep := runPressure(t, ModeProcesses, PressureCache, 3, 3*time.Second)
	if rep.Pass || rep.Cache == nil || rep.Cache.Lost == 0 {
		t.Fatalf("updates without the lock: pass %v, %+v", rep.Pass, rep.Cache)
	}
}

// JudgeCache on made-up histories: each rule fires on its bug and stays quiet on the legal
// outcomes around it.
func TestJudgeCacheRules(t *testing.T) {
	st := func(h int, key string, id, start, end int64) CacheOp {
		return CacheOp{Op: "store", Hammer: h, Key: key, ID: id, Start: start, End: end}
	}
	lk := func(h int, key string, id, start, end int64) CacheOp {
		return CacheOp{Op: "lookup", Hammer: h, Key: key, ID: id, Exact: id >= 0, Start: start, End: end}
	}
	inject := CacheOp{Op: "inject", Hammer: -1, Start: 50, End: 60, Reason: "truncated"}
	notice := CacheOp{Op: "notice", Hammer: 1, Start: 70, End: 70, Code: string(errs.CacheCorrupt)}
	final := func(kv ...any) map[string]autotune.Entry {
		m := map[string]autotune.Entry{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = entryFor(kv[i].(string), int64(kv[i+1].(int)))
		}
		return m
	}
	for _, tc := range []struct {
		name        string
		ops         []CacheOp
		final       map[string]autotune.Entry
		lost, wrong int
		want        string // a failure line contains it ("" none)
	}{
		{"clean", []CacheOp{st(0, "h0/k0", 1, 0, 5), lk(0, "h0/k0", 1, 6, 7), st(0, "h0/k0", 2, 8, 9), st(1, "shared/k0", 3, 0, 10), st(0, "shared/k0", 4, 5, 12)},
			final("h0/k0", 2, "shared/k0", 4), 0, 0, ""},
		{"concurrent shared stores: either may win", []CacheOp{st(1, "shared/k0", 3, 0, 10), st(0, "shared/k0", 4, 5, 12)},
			final("shared/k0", 3), 0, 0, ""},
		{"own lookup sees an older value", []CacheOp{st(0, "h0/k0", 1, 0, 5), st(0, "h0/k0", 2, 8, 9), lk(0, "h0/k0", 1, 10, 11)},
			final("h0/k0", 2), 1, 0, "a lost write"},
		{"lookup misses", []CacheOp{st(0, "h0/k0", 1, 0, 5), lk(1, "shared/k1", -1, 6, 7), st(1, "shared/k1", 2, 1, 2)},
			final("h0/k0", 1, "shared/k1", 2), 1, 0, "missed"},
		{"final misses a key", []CacheOp{st(0, "h0/k0", 1, 0, 5)}, final(), 1, 0, "missing from the final file"},
		{"final holds a superseded shared value", []CacheOp{st(1, "shared/k0", 3, 0, 4), st(0, "shared/k0", 4, 5, 12)},
			final("shared/k0", 3), 1, 0, "stored after it"},
		{"a value nobody stored", []CacheOp{st(0, "h0/k0", 1, 0, 5), lk(0, "h0/k0", 7, 6, 7)}, final("h0/k0", 1, "h9/k9", 3), 0, 2, "no hammer stored it"},
		{"a torn entry", []CacheOp{st(0, "h0/k0", 1, 0, 5), {Op: "lookup", Hammer: 0, Key: "h0/k0", ID: 1, Exact: false, Start: 6, End: 7}}, final("h0/k0", 1), 0, 1, "not exactly"},
		{"entries before a corruption may go", []CacheOp{st(0, "h0/k0", 1, 0, 5), inject, notice, lk(0, "h0/k0", -1, 70, 71), st(0, "h0/k1", 2, 80, 90)},
			final("h0/k1", 2), 0, 0, ""},
		{"entries after a corruption may not", []CacheOp{inject, notice, st(0, "h0/k1", 2, 80, 90), lk(0, "h0/k1", -1, 91, 92)},
			final(), 2, 0, "missed"},
		{"corruption not detected", []CacheOp{st(0, "h0/k0", 1, 0, 5), inject}, final(), 0, 0, "corruption not detected"},
		{"corruption nobody injected", []CacheOp{st(0, "h0/k0", 1, 0, 5), notice}, final("h0/k0", 1), 0, 0, "the hammers corrupted it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, bad := JudgeCache(tc.ops, tc.final)
			joined := strings.Join(bad, "\n")
			if r.Lost != tc.lost || r.Wrong != tc.wrong || (tc.want == "") != (len(bad) == 0) || !strings.Contains(joined, tc.want) {
				t.Fatalf("lost %d wrong %d (want %d %d), failures:\n%s\nwant a line with %q", r.Lost, r.Wrong, tc.lost, tc.wrong, joined, tc.want)
			}
		})
	}
}

// The hog refuses to run where there is no memory to fill: the CPU backend without a budget.
func TestHogNeedsABudgetOnTheCPU(t *testing.T) {
	prev := cpubackend.SetMemLimit(0)
	t.Cleanup(func() { cpubackend.SetMemLimit(prev) })
	p, err := MakePlan(cpu(t), 5, 1, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	err = RunHog(context.Background(), JobOptions{Plan: p, Job: 0, Backend: cpu(t), Until: time.Now().Add(time.Second), Emit: func(Event) {}})
	if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), cpubackend.EnvMemLimit) {
		t.Fatalf("hog without a budget: %v, want E_INPUT naming %s", err, cpubackend.EnvMemLimit)
	}
}

// warmAll judges every pool of the plan: a wrong digest in another job's pool is caught by
// this job's warm-up, as a mismatch naming that graph.
func TestWarmAllJudgesEveryPool(t *testing.T) {
	b := cpu(t)
	p, err := MakePlan(b, 9, 2, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(p.Jobs[1][0].Digest, ",")
	parts[0] = strings.Repeat("0", len(parts[0]))
	p.Jobs[1][0].Digest = strings.Join(parts, ",")
	var evs []Event
	err = RunJob(context.Background(), JobOptions{Plan: p, Job: 0, Backend: b, Until: time.Now(), WarmAll: true,
		Emit: func(e Event) { evs = append(evs, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Code != string(errs.Nondeterministic) || evs[0].Job != 0 || evs[0].Graph >= 0 || !strings.Contains(evs[0].Reason, "job1-graph0") {
		t.Fatalf("events %+v, want one mismatch of job1-graph0 in job 0's warm-up", evs)
	}
}
