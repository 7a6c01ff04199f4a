package stress

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/tessera-qa/tessera-qa/profiling"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/internal/testdeadline"
)

// The test binary doubles as the worker process: STRESS_TEST_WORKER holds the WorkerArgs.
func TestMain(m *testing.M) {
	if a := os.Getenv("STRESS_TEST_WORKER"); a != "" {
		b, _ := backend.Get("cpu")
		if err := Worker(context.Background(), a, b, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	testdeadline.Main(m)
}

func testCommand(ctx context.Context, args string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "STRESS_TEST_WORKER="+args)
	return cmd
}

func cpu(t *testing.T) backend.Backend {
	t.Helper()
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func series(vals ...float64) []Sample {
	out := make([]Sample, len(vals))
	for i, v := range vals {
		out[i] = Sample{T: float64(i), Phase: "during", Values: map[string]float64{MonRSS: v}}
	}
	return out
}

func TestJudgeCatchesSyntheticLeak(t *testing.T) {
	var leak, flat, sawtooth, spike []float64
	for i := range 40 {
		leak = append(leak, 100e6+float64(i)*4e6)                           // +4 MB a sample: 156 MB over the soak
		flat = append(flat, 100e6+float64(i%3)*1e6)                         // noise
		sawtooth = append(sawtooth, 100e6+float64(i%10)*20e6)               // GC: climbs 180 MB and falls back
		spike = append(spike, 100e6+map[bool]float64{true: 500e6}[i == 39]) // one burst at the end
	}
	if l := Judge(MonRSS, "p", series(leak...)); !l.Leak || !l.Monotone || l.Slope < 200e6 {
		t.Errorf("linear growth of 4 MB/sample not a leak: %+v", l)
	}
	for name, s := range map[string][]float64{"flat": flat, "sawtooth": sawtooth, "spike": spike} {
		if l := Judge(MonRSS, "p", series(s...)); l.Leak {
			t.Errorf("%s called a leak: %+v", name, l)
		}
	}
	// Growth under the allowance is not a leak, just over it is.
	under, over := []float64{}, []float64{}
	for i := range 8 {
		under = append(under, float64(i)*Allowances[MonRSS]/8)
		over = append(over, float64(i)*Allowances[MonRSS]/5)
	}
	if l := Judge(MonRSS, "p", series(under...)); l.Leak {
		t.Errorf("growth under the allowance called a leak: %+v", l)
	}
	if l := Judge(MonRSS, "p", series(over...)); !l.Leak {
		t.Errorf("growth over the allowance not a leak: %+v", l)
	}
	// A step in the warm-up window (neighbours' contexts appearing in the device-wide used
	// memory, as in the H100 soak) is not a leak; the same step followed by growth is.
	var step, stepGrow []float64
	for i := range 40 {
		v := 1.9e9
		if i >= 3 {
			v = 4.97e9
		}
		step, stepGrow = append(step, v), append(stepGrow, v+float64(i)*20e6)
	}
	if l := Judge(MonRSS, "p", series(step...)); l.Leak || l.Growth < 3e9 || l.LateGrowth != 0 {
		t.Errorf("a warm-up step called a leak: %+v", l)
	}
	if l := Judge(MonRSS, "p", series(stepGrow...)); !l.Leak {
		t.Errorf("growth after a warm-up step not a leak: %+v", l)
	}
	if l := Judge(MonRSS, "p", series(1, 2, 3)); l.Leak || l.Samples != 3 {
		t.Errorf("3 samples judged: %+v", l)
	}
}

func TestSamplerReadsThisProcess(t *testing.T) {
	dir := t.TempDir()
	s := Sampler{TempDir: dir}
	a := s.Read(0, "before")
	f, err := os.Create(filepath.Join(dir, "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	done := make(chan struct{})
	go func() { <-done }()
	b := s.Read(1, "during")
	close(done)
	if a.Values[MonRSS] <= 0 || a.Values[MonFDs] <= 0 {
		t.Fatalf("no RSS or fd reading: %v", a.Values)
	}
	if b.Values[MonTempFiles] != a.Values[MonTempFiles]+1 || b.Values[MonFDs] < a.Values[MonFDs]+1 || b.Values[MonGoroutines] < a.Values[MonGoroutines]+1 {
		t.Fatalf("a file, an fd and a goroutine not seen: before %v after %v", a.Values, b.Values)
	}
}

func TestPlanIsAPureFunctionOfTheSeed(t *testing.T) {
	b := cpu(t)
	p1, err := MakePlan(b, 7, 2, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := MakePlan(b, 7, 2, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	for j := range p1.Jobs {
		for i, g := range p1.Jobs[j] {
			if g.Seed != p2.Jobs[j][i].Seed || g.Digest != p2.Jobs[j][i].Digest || g.Digest == "" {
				t.Fatalf("job %d graph %d: %+v vs %+v", j, i, g, p2.Jobs[j][i])
			}
		}
	}
	if p1.Jobs[0][0].Seed == p1.Jobs[1][0].Seed {
		t.Fatal("jobs share a seed")
	}
}

func TestWrongDigestIsNondeterministicWithManifest(t *testing.T) {
	b := cpu(t)
	p, err := MakePlan(b, 3, 1, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(p.Jobs[0][1].Digest, ",")
	parts[0] = strings.Repeat("0", len(parts[0])) // as if the alone run had given other bits
	p.Jobs[0][1].Digest = strings.Join(parts, ",")
	dir := t.TempDir()
	var evs []Event
	err = RunJob(context.Background(), JobOptions{Plan: p, Job: 0, Backend: b, Until: time.Now().Add(300 * time.Millisecond),
		Replays: dir, Emit: func(e Event) { evs = append(evs, e) }})
	if err != nil {
		t.Fatal(err)
	}
	var good, bad int
	for _, e := range evs {
		switch {
		case e.Graph == 0 && e.Verdict == harness.VerdictPass:
			good++
		case e.Graph == 1 && e.Code == "E_NONDETERMINISTIC" && e.Replay != "":
			bad++
			m, err := harness.LoadManifest(e.Replay)
			if err != nil || m.Kind != harness.KindDigest {
				t.Fatalf("manifest %s: %v %+v", e.Replay, err, m.Kind)
			}
		default:
			t.Fatalf("unexpected event %+v", e)
		}
	}
	if good == 0 || bad == 0 {
		t.Fatalf("good %d bad %d", good, bad)
	}
}

func run(t *testing.T, mode string, jobs int, d time.Duration, plant string) *Report {
	t.Helper()
	return runOpts(t, Options{Mode: mode, Jobs: jobs, Duration: d, Plant: plant})
}

// runOpts runs o with the tests' defaults filled in.
func runOpts(t *testing.T, o Options) *Report {
	t.Helper()
	out := t.TempDir()
	o.Backend, o.Seed, o.PerJob, o.Reps, o.Interval, o.OutDir, o.Command = cpu(t), 1, 3, 2, 50*time.Millisecond, out, testCommand
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.MarshalIndent(rep, "", " ")
	t.Logf("%s", js)
	if _, err := os.Stat(filepath.Join(out, "history.jsonl")); err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestGoroutinesCleanRunPasses(t *testing.T) {
	rep := run(t, ModeGoroutines, 2, 2*time.Second, "")
	if !rep.Pass || rep.Graphs == 0 || rep.Mismatches != 0 || len(rep.Latency) != 2 || len(rep.Monitors) == 0 {
		t.Fatalf("clean run: %+v", rep)
	}
}

// Profiled, too: every loaded result must still equal its unprofiled alone run's bits.
func TestProcessesCleanRunPasses(t *testing.T) {
	rep := runOpts(t, Options{Mode: ModeProcesses, Jobs: 2, Duration: 2 * time.Second, Profile: true})
	if !rep.Pass || rep.Graphs == 0 || rep.Mismatches != 0 {
		t.Fatalf("clean run: %+v", rep)
	}
	st, err := profiling.ValidateFile(rep.Trace)
	if err != nil || st.Slices == 0 || len(st.Processes) != 2 {
		t.Fatalf("trace %s: %+v, %v", rep.Trace, st, err)
	}
	sources := map[string]bool{}
	for _, l := range rep.Monitors {
		sources[l.Source] = true
	}
	if !sources["job 0"] || !sources["job 1"] {
		t.Fatalf("monitors not per worker: %v", sources)
	}
}

func TestPlantedLeakIsCaught(t *testing.T) {
	rep := run(t, ModeProcesses, 1, 3*time.Second, PlantLeak)
	if rep.Pass || rep.LeakCount == 0 {
		t.Fatalf("planted leak not caught: %+v", rep)
	}
	var rss bool
	for _, l := range rep.Monitors {
		rss = rss || (l.Monitor == MonRSS && l.Leak)
	}
	if !rss {
		t.Fatalf("RSS monitor did not call it: %+v", rep.Monitors)
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	if Percentile(xs, 50) != 5 || Percentile(xs, 99) != 10 || Percentile(nil, 50) != 0 || Percentile(xs, 0) != 1 {
		t.Fatal(Percentile(xs, 50), Percentile(xs, 99))
	}
}

// The engine fault that keeps every run's buffers (a failpoints build only): results stay
// right, so only the RSS monitor can catch it.
func TestEngineBufferLeakIsCaught(t *testing.T) {
	if !failpoint.Compiled {
		t.Skip("needs a failpoints build: go test -tags failpoints ./stress")
	}
	t.Setenv(failpoint.EnvVar, failpoint.CPUBuffersKeptPerRun) // read by the worker processes at start-up
	// The small graphs' buffers add up to about 16 MB/s on a CPU job: ten seconds take the
	// RSS floor well past its 64 MiB allowance.
	rep := run(t, ModeProcesses, 1, 10*time.Second, "")
	if rep.Pass || rep.LeakCount == 0 || rep.Mismatches != 0 {
		t.Fatalf("buffers kept per run: pass %v, leaks %d, mismatches %d", rep.Pass, rep.LeakCount, rep.Mismatches)
	}
	for _, l := range rep.Monitors {
		if l.Monitor == MonRSS && !l.Leak {
			t.Fatalf("RSS monitor did not call it: %+v", l)
		}
	}
}

func TestReservoirIsBoundedAndUniform(t *testing.T) {
	r := newReservoir(1)
	for i := range 10 * reservoirSize {
		r.add(float64(i))
	}
	if len(r.xs) != reservoirSize || r.n != 10*reservoirSize {
		t.Fatalf("kept %d of %d", len(r.xs), r.n)
	}
	// A uniform sample of 0..N-1 has its median near N/2.
	if m := Percentile(r.xs, 50); m < 0.45*float64(r.n) || m > 0.55*float64(r.n) {
		t.Fatalf("median %v of a sample of 0..%d", m, r.n-1)
	}
}

// --spread places job j's process on GPU j mod N; nothing else is placed (goroutine or stream
// jobs, one GPU).
func TestDeviceEnvSpreadsJobProcesses(t *testing.T) {
	o := Options{Mode: ModeProcesses, Devices: 4}
	for job, want := range []string{"TESSERA_CUDA_DEVICE=0", "TESSERA_CUDA_DEVICE=1", "TESSERA_CUDA_DEVICE=2", "TESSERA_CUDA_DEVICE=3", "TESSERA_CUDA_DEVICE=0"} {
		if got := deviceEnv(o, job); got != want {
			t.Errorf("job %d: %q, want %q", job, got, want)
		}
	}
	for _, o := range []Options{{Mode: ModeProcesses, Devices: 1}, {Mode: ModeGoroutines, Devices: 4}, {Mode: ModeStreams, Devices: 4}} {
		if got := deviceEnv(o, 3); got != "" {
			t.Errorf("%+v: %q", o, got)
		}
	}
}
