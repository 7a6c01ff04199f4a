package autotune

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/ref"
)

// favour times every config at 10 ms except the listed ones.
func favour(kind string, fast map[Config]float64) func(s compiler.Schedule) float64 {
	return func(s compiler.Schedule) float64 {
		if ms, ok := fast[configOf(s)]; ok && s.Kind == kind {
			return ms
		}
		return 10
	}
}

func TestTuneChoosesTheFastestCorrectConfig(t *testing.T) {
	g := mustParse(t, matmulSrc)
	in := randomInputs(t, g, 1)
	win := cfg(32, 64, 16, 2)
	ft := &fakeTimer{ms: favour("matmul", map[Config]float64{win: 4, cfg(64, 32, 32, 2): 6})}
	configs, rep, err := cpuTuner(ft, nil, hostCPU).Tune(g, in)
	if err != nil {
		t.Fatal(err)
	}
	kr := kernelReport(t, rep, "matmul")
	if kr.Chosen != win || kr.BestMs != 4 || kr.DefaultMs != 10 || kr.CacheHit {
		t.Errorf("matmul report %+v, want %v at 4 ms (default 10 ms), no cache hit", kr, win)
	}
	if kr.Measured != kr.Candidates || len(kr.Rejected) != 0 || kr.Candidates < 10 {
		t.Errorf("measured %d of %d candidates, rejected %v", kr.Measured, kr.Candidates, kr.Rejected)
	}
	key := kr.Key
	if s := configs[key]; configOf(s) != win || s.Source != "autotune" || s.Key != key {
		t.Errorf("configs[%s] = %+v", key, s)
	}
	// The elementwise epilogue was tuned too: every time is 10 ms, so the default stays.
	ew := kernelReport(t, rep, "elementwise")
	if ew.Chosen != ew.Default || configOf(configs[ew.Key]) != ew.Default {
		t.Errorf("tied elementwise kernel moved off its default: %+v", ew)
	}
	if rep.ScheduleHash == rep.DefaultScheduleHash || rep.Clock != "fake clock" || rep.Reps != 5 {
		t.Errorf("report header %+v", rep)
	}
}

func TestTunedConfigsChangeTheProgramAndKeepResults(t *testing.T) {
	g := mustParse(t, mixedSrc)
	in := randomInputs(t, g, 2)
	// Prefer the last config of every space: the farthest from each default.
	last := map[string]Config{}
	base := mustCompile(t, g, nil)
	for i, s := range base.Schedules {
		sp, err := Space(base, i, hostCPU)
		if err != nil {
			t.Fatal(err)
		}
		last[s.Key] = sp[len(sp)-1]
	}
	ft := &fakeTimer{ms: func(s compiler.Schedule) float64 {
		if configOf(s) == last[s.Key] {
			return 1
		}
		return 5
	}}
	configs, rep, err := cpuTuner(ft, nil, hostCPU).Tune(g, in)
	if err != nil {
		t.Fatal(err)
	}
	tuned := mustCompile(t, g, configs)
	moved := 0
	for i, s := range tuned.Schedules {
		if s.Source != "autotune" {
			t.Errorf("kernel %s not tuned: %s", s.Kernel, s)
		}
		if configOf(s) != last[s.Key] {
			t.Errorf("kernel %s got %v, want %v", s.Kernel, configOf(s), last[s.Key])
		}
		if configOf(s) != configOf(base.Schedules[i]) {
			moved++
		}
	}
	if moved < 5 || tuned.ScheduleHash != rep.ScheduleHash || tuned.ScheduleHash == base.ScheduleHash {
		t.Errorf("%d kernels moved; hashes tuned %s report %s default %s", moved, tuned.ScheduleHash, rep.ScheduleHash, base.ScheduleHash)
	}
	got, err := (&cpu.Backend{}).Run(tuned, in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Run(g, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := CompareOutputs(got, want); err != nil {
		t.Errorf("tuned program against the golden model: %v", err)
	}
}

func TestTuneTieBreakIsDeterministic(t *testing.T) {
	g := mustParse(t, matmulSrc)
	in := randomInputs(t, g, 3)
	for _, tc := range []struct {
		name string
		fast map[Config]float64
		band float64
		want Config
	}{
		{"equal medians: smallest config", map[Config]float64{cfg(64, 32, 32, 2): 5, cfg(32, 64, 32, 2): 5, cfg(64, 64, 16, 2): 5}, 0, cfg(32, 64, 32, 2)},
		{"within the band: smallest config", map[Config]float64{cfg(64, 128, 32, 2): 5, cfg(32, 64, 32, 2): 5.04}, 0, cfg(32, 64, 32, 2)},
		{"exact band: fastest", map[Config]float64{cfg(64, 128, 32, 2): 5, cfg(32, 64, 32, 2): 5.04}, -1, cfg(64, 128, 32, 2)},
		{"default within the band wins", map[Config]float64{cfg(64, 64, 32, 2): 5.03, cfg(32, 64, 32, 2): 5}, 0, cfg(64, 64, 32, 2)},
	} {
		var first Config
		for run := range 2 {
			tu := cpuTuner(&fakeTimer{ms: favour("matmul", tc.fast)}, nil, hostCPU)
			tu.TieBand = tc.band
			_, rep, err := tu.Tune(g, in)
			if err != nil {
				t.Fatal(err)
			}
			c := kernelReport(t, rep, "matmul").Chosen
			if c != tc.want {
				t.Errorf("%s: chose %v, want %v", tc.name, c, tc.want)
			}
			if run == 1 && c != first {
				t.Errorf("%s: second run chose %v, first %v", tc.name, c, first)
			}
			first = c
		}
	}
}

func TestTuneNeverChoosesAWrongConfig(t *testing.T) {
	g := mustParse(t, matmulSrc)
	in := randomInputs(t, g, 4)
	bad, good := cfg(32, 32, 32, 2), cfg(64, 32, 16, 2)
	ft := &fakeTimer{ms: favour("matmul", map[Config]float64{bad: 0.5, good: 3})}
	tu := cpuTuner(ft, nil, hostCPU)
	tu.Runner = wrongRunner{kind: "matmul", bad: bad}
	_, rep, err := tu.Tune(g, in)
	if err != nil {
		t.Fatal(err)
	}
	kr := kernelReport(t, rep, "matmul")
	if kr.Chosen != good {
		t.Errorf("chose %v, want %v (the fastest correct config)", kr.Chosen, good)
	}
	i := slices.IndexFunc(kr.Rejected, func(r Rejection) bool { return r.Config == bad })
	if i < 0 || !strings.Contains(kr.Rejected[i].Reason, "outputs differ") || len(kr.Rejected) != 1 {
		t.Errorf("rejections %+v, want only %v for its outputs", kr.Rejected, bad)
	}
	if ft.timedConfig(bad) {
		t.Error("a wrong config reached the timer")
	}
	if kr.Measured != kr.Candidates-1 {
		t.Errorf("measured %d of %d", kr.Measured, kr.Candidates)
	}
}

func TestTuneCacheHitMeasuresNothing(t *testing.T) {
	g := mustParse(t, matmulSrc)
	in := randomInputs(t, g, 5)
	cache, warn := newCache(t)
	win := cfg(32, 128, 32, 2)
	ft := &fakeTimer{ms: favour("matmul", map[Config]float64{win: 2})}
	c1, _, err := cpuTuner(ft, cache, hostCPU).Tune(g, in)
	if err != nil {
		t.Fatal(err)
	}
	if ft.calls == 0 {
		t.Fatal("first tune measured nothing")
	}
	// A second process (a fresh tuner) with a timer that would now prefer something else.
	ft2 := &fakeTimer{ms: favour("matmul", map[Config]float64{cfg(64, 32, 32, 2): 1})}
	c2, rep, err := cpuTuner(ft2, cache, hostCPU).Tune(g, in)
	if err != nil {
		t.Fatal(err)
	}
	if ft2.calls != 0 {
		t.Errorf("cache hit timed %d times", ft2.calls)
	}
	if !reflect.DeepEqual(c1, c2) {
		t.Errorf("cached configs %v differ from tuned %v", c2, c1)
	}
	for _, kr := range rep.Kernels {
		if !kr.CacheHit || kr.Measured != 0 {
			t.Errorf("kernel %s: cache hit %v, measured %d", kr.Key, kr.CacheHit, kr.Measured)
		}
	}
	if kr := kernelReport(t, rep, "matmul"); kr.Chosen != win || kr.BestMs != 2 || kr.DefaultMs != 10 {
		t.Errorf("cached matmul report %+v", kr)
	}
	// Another engine version misses.
	ft3 := &fakeTimer{ms: favour("matmul", nil)}
	tu := cpuTuner(ft3, cache, hostCPU)
	tu.Engine = "9.9.9"
	if _, _, err := tu.Tune(g, in); err != nil || ft3.calls == 0 {
		t.Errorf("new engine version: err %v, %d timings", err, ft3.calls)
	}
	if warn.Len() > 0 {
		t.Errorf("warnings: %s", warn)
	}
}

func TestTuneDevicesKeepTheirOwnEntries(t *testing.T) {
	g := mustParse(t, matmulSrc)
	in := randomInputs(t, g, 6)
	cache, _ := newCache(t)
	// Same arch, different SM counts: each device has its own fastest config.
	devA, devB := h100, h100nvl
	devA.SharedPerBlock, devB.SharedPerBlock = 0, 0 // the CPU backend runs them: no stages to tune
	winA, winB := cfg(32, 64, 32, 2), cfg(64, 128, 16, 2)
	for _, tc := range []struct {
		d   Device
		win Config
	}{{devA, winA}, {devB, winB}} {
		if _, rep, err := cpuTuner(&fakeTimer{ms: favour("matmul", map[Config]float64{tc.win: 1})}, cache, tc.d).Tune(g, in); err != nil {
			t.Fatal(err)
		} else if c := kernelReport(t, rep, "matmul").Chosen; c != tc.win {
			t.Fatalf("%s chose %v, want %v", tc.d.Key(), c, tc.win)
		}
	}
	for _, tc := range []struct {
		d   Device
		win Config
	}{{devA, winA}, {devB, winB}} {
		ft := &fakeTimer{ms: favour("matmul", nil)}
		_, rep, err := cpuTuner(ft, cache, tc.d).Tune(g, in)
		if err != nil {
			t.Fatal(err)
		}
		if kr := kernelReport(t, rep, "matmul"); !kr.CacheHit || kr.Chosen != tc.win || ft.calls != 0 {
			t.Errorf("%s: hit %v chose %v (want %v), %d timings", tc.d.Key(), kr.CacheHit, kr.Chosen, tc.win, ft.calls)
		}
	}
}

func TestTuneRetunesABadCacheEntry(t *testing.T) {
	g := mustParse(t, matmulSrc)
	in := randomInputs(t, g, 7)
	cache, warn := newCache(t)
	base := mustCompile(t, g, nil)
	key := base.Schedules[0].Key
	// An entry this problem cannot use (tile beyond the padded M), and one that is wrong.
	for _, bad := range []Config{cfg(512, 64, 32, 2), cfg(32, 32, 32, 2)} {
		warn.Reset()
		must(t, cache.Store(hostCPU, Entry{Key: key, Engine: "0.1.0", Kind: "matmul", Config: bad}))
		tu := cpuTuner(&fakeTimer{ms: favour("matmul", nil)}, cache, hostCPU)
		tu.Engine = "0.1.0"
		tu.Runner = wrongRunner{kind: "matmul", bad: cfg(32, 32, 32, 2)}
		_, rep, err := tu.Tune(g, in)
		if err != nil {
			t.Fatal(err)
		}
		kr := kernelReport(t, rep, "matmul")
		if kr.CacheHit || kr.Chosen == bad || kr.Measured == 0 || !strings.Contains(kr.Note, "rejected") {
			t.Errorf("entry %v: %+v", bad, kr)
		}
		if !strings.Contains(warn.String(), "retuned") {
			t.Errorf("entry %v: no warning (%q)", bad, warn)
		}
		if e, _, _ := cache.Lookup(hostCPU, "0.1.0", key); e.Config != kr.Chosen {
			t.Errorf("entry %v not replaced: cache holds %v", bad, e.Config)
		}
	}
}

func TestTuneSkipsHintedKernels(t *testing.T) {
	g := mustParse(t, `graph hinted {
  input %a: f32[48,40]
  input %b: f32[40,72]
  %c: f32[48,72] = matmul(%a, %b) {tile=[16,32,8]}
  output %c
}`)
	ft := &fakeTimer{ms: favour("matmul", nil)}
	configs, rep, err := cpuTuner(ft, nil, hostCPU).Tune(g, randomInputs(t, g, 8))
	if err != nil {
		t.Fatal(err)
	}
	kr := kernelReport(t, rep, "matmul")
	if !strings.Contains(kr.Skipped, "hint") || len(configs) != 0 || ft.calls != 0 {
		t.Errorf("hinted kernel: %+v, configs %v, %d timings", kr, configs, ft.calls)
	}
}

func TestTuneTimerFailures(t *testing.T) {
	g := mustParse(t, matmulSrc)
	in := randomInputs(t, g, 9)
	broken := cfg(32, 64, 32, 2)
	ft := &fakeTimer{ms: favour("matmul", map[Config]float64{broken: 0.1}), fail: func(s compiler.Schedule) error {
		if configOf(s) == broken {
			return errs.New(errs.Timeout, "kernel hung")
		}
		return nil
	}}
	_, rep, err := cpuTuner(ft, nil, hostCPU).Tune(g, in)
	if err != nil {
		t.Fatal(err)
	}
	kr := kernelReport(t, rep, "matmul")
	if kr.Chosen == broken || len(kr.Rejected) != 1 || !strings.Contains(kr.Rejected[0].Reason, "kernel hung") {
		t.Errorf("report %+v", kr)
	}
	// A timer that cannot time the default is an error, as is a runner that cannot run it.
	ft = &fakeTimer{ms: favour("matmul", nil), fail: func(compiler.Schedule) error { return errs.New(errs.Timeout, "hung") }}
	if _, _, err := cpuTuner(ft, nil, hostCPU).Tune(g, in); errs.CodeOf(err) != errs.Timeout || !strings.Contains(err.Error(), "default schedule") {
		t.Errorf("default untimeable: %v", err)
	}
	tu := cpuTuner(&fakeTimer{ms: favour("matmul", nil)}, nil, hostCPU)
	tu.Runner = failingRunner{}
	if _, _, err := tu.Tune(g, in); errs.CodeOf(err) != errs.IllegalAddress {
		t.Errorf("default unrunnable: %v", err)
	}
	// NaN times: a broken clock never makes a config look fast.
	ft = &fakeTimer{ms: func(s compiler.Schedule) float64 {
		if configOf(s) == broken {
			return -1
		}
		return 3
	}}
	if _, rep, err := cpuTuner(ft, nil, hostCPU).Tune(g, in); err != nil || kernelReport(t, rep, "matmul").Chosen == broken {
		t.Errorf("negative times: %v", err)
	}
}

func TestTuneBadSetup(t *testing.T) {
	g := mustParse(t, matmulSrc)
	in := randomInputs(t, g, 10)
	for name, tu := range map[string]*Tuner{
		"no timer":  {Runner: &cpu.Backend{}, Device: hostCPU},
		"no runner": {Timer: &fakeTimer{}, Device: hostCPU},
		"no device": {Timer: &fakeTimer{}, Runner: &cpu.Backend{}},
		"bad reps":  {Timer: &fakeTimer{}, Runner: &cpu.Backend{}, Device: hostCPU, Reps: -1},
	} {
		if _, _, err := tu.Tune(g, in); errs.CodeOf(err) != errs.Input {
			t.Errorf("%s: %v, want E_INPUT", name, err)
		}
	}
	tu := cpuTuner(&fakeTimer{ms: favour("matmul", nil)}, nil, hostCPU)
	if _, _, err := tu.Tune(nil, in); errs.CodeOf(err) != errs.Input {
		t.Errorf("nil graph: %v", err)
	}
	delete(in, "a")
	if _, _, err := tu.Tune(g, in); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "default schedules") {
		t.Errorf("missing input: %v", err)
	}
}

func TestTuneMaxCandidates(t *testing.T) {
	g := mustParse(t, matmulSrc)
	ft := &fakeTimer{ms: favour("matmul", nil)}
	tu := cpuTuner(ft, nil, hostCPU)
	tu.MaxCandidates = 3
	_, rep, err := tu.Tune(g, randomInputs(t, g, 11))
	if err != nil {
		t.Fatal(err)
	}
	if kr := kernelReport(t, rep, "matmul"); kr.Measured != 3 || kr.Candidates <= 3 {
		t.Errorf("measured %d of %d, want 3", kr.Measured, kr.Candidates)
	}
}

func TestWallTimer(t *testing.T) {
	g := mustParse(t, matmulSrc)
	p := mustCompile(t, g, nil)
	w := WallTimer{Name: "cpu", Runner: &cpu.Backend{}, Warmup: 1}
	if w.Clock() != "cpu wall-clock timer" {
		t.Errorf("clock %q", w.Clock())
	}
	times, err := w.Time(p, 0, randomInputs(t, g, 12), 3)
	if err != nil || len(times) != 3 {
		t.Fatalf("times %v, %v", times, err)
	}
	for _, ms := range times {
		if ms <= 0 || ms > 5000 {
			t.Errorf("implausible time %v ms", ms)
		}
	}
	if _, err := (WallTimer{Name: "x"}).Time(p, 0, nil, 1); err == nil {
		t.Error("timer without runner")
	}
}

func TestTuneSinglePointSpaceMeasuresNothing(t *testing.T) {
	g := mustParse(t, `graph tiny {
  input %a: f32[5,7]
  input %b: f32[7,3]
  %c: f32[5,3] = matmul(%a, %b)
  output %c
}`)
	cache, _ := newCache(t)
	ft := &fakeTimer{ms: favour("matmul", nil)}
	configs, rep, err := cpuTuner(ft, cache, hostCPU).Tune(g, randomInputs(t, g, 13))
	if err != nil {
		t.Fatal(err)
	}
	kr := kernelReport(t, rep, "matmul")
	if ft.calls != 0 || kr.Measured != 0 || kr.Chosen != kr.Default || kr.Note == "" || configOf(configs[kr.Key]) != kr.Default {
		t.Errorf("single-point space: %d timings, report %+v", ft.calls, kr)
	}
	if _, ok, _ := cache.Lookup(hostCPU, "0.1.0", kr.Key); !ok {
		t.Error("single-point choice not remembered")
	}
}
