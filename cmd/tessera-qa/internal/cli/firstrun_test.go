package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/internal/headless"
	"github.com/tessera-qa/tessera-qa/job"
	"github.com/tessera-qa/tessera-qa/report"
)

// Issue 21, as a newcomer meets the tool: `tessera-qa run` in a folder, then the dashboard,
// then `run` again in the same folder. The first run's every dashboard page must show what it
// ran (no "no data yet" where the job measured something), looked at in headless Chromium;
// the second run must pass too, in a folder of its own, leave the first run's artifacts where
// they were, and leave the gate passing with nothing flaky (the second run's chaos suite used
// to error on the first one's histories, and the dashboard listed those scenarios as flaky).
func TestRunTwiceInOneFolderAndTheDashboardShowsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("two main jobs and a dashboard in Chromium: about 40 s, skipped with -short")
	}
	start := time.Now()
	out := filepath.Join(t.TempDir(), "tessera-qa-out")
	db := filepath.Join(out, "results.db")
	first := runJob(t, out)
	t.Logf("first run: %.1f s", time.Since(start).Seconds())

	// What the job measured is in its run folder, in the formats the reporter reads.
	for _, name := range []string{job.ChaosFile, job.StressFile, job.CollectivesFile, job.BenchFile, job.DoctorFile, "results.json", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(first.RunDir, name)); err != nil {
			t.Errorf("run folder lacks %s: %v", name, err)
		}
	}
	if len(first.Measurements) != 5 {
		t.Errorf("measurements %v, want chaos, stress, doctor, collectives and bench", first.Measurements)
	}

	site := filepath.Join(t.TempDir(), "site")
	cli(t, "dashboard", "export", "--db", db, site).want(t, ExitOK, "")
	lookAtEveryPage(t, site)
	t.Logf("first run and its dashboard: %.1f s", time.Since(start).Seconds())

	second := runJob(t, out)
	if second.RunDir == first.RunDir || filepath.Dir(second.RunDir) != filepath.Join(out, job.RunsDir) {
		t.Fatalf("second run's folder %s, first %s", second.RunDir, first.RunDir)
	}
	// The first run's artifacts stay addressable: its results, its chaos histories.
	hist, _ := filepath.Glob(filepath.Join(first.RunDir, "chaos", "*", "history.jsonl"))
	if len(hist) != 4 {
		t.Errorf("the first run's chaos histories after the second run: %v", hist)
	}
	o := cli(t, "gate", "--db", db)
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "gate passed") || !strings.Contains(o.stdout, "(2 runs)") || strings.Contains(o.stdout, "WARN") {
		t.Errorf("gate after two runs in one folder:\n%s", o.stdout)
	}
	o = cli(t, "report", "flaky", "--db", db, "--json", "-")
	var flaky []report.FlakySpec
	mustJSON(t, o.stdout, &flaky)
	if len(flaky) != 0 {
		t.Errorf("flaky after two runs: %+v", flaky)
	}
	// The benchmark series now have two points each (same commit: still no baseline to judge).
	o = cli(t, "report", "series", "--db", db, "--json", "-")
	var series []report.SeriesSummary
	mustJSON(t, o.stdout, &series)
	if len(series) != 7 {
		t.Errorf("%d bench series after two runs, want 7 (6 timed cases and profile/mlp)", len(series))
	}
	for _, s := range series {
		if s.Points != 2 {
			t.Errorf("series %s has %d points after two runs", s.Key, s.Points)
		}
	}
	t.Logf("whole spec: %.1f s", time.Since(start).Seconds())
}

// runJob runs the main job as a user does (every suite, the cpu backend, a small smoke count
// to keep the spec short) and returns its report.
func runJob(t *testing.T, out string) runJSON {
	t.Helper()
	o := cli(t, "run", "--backend", "cpu", "--smoke", "20", "--seed", "3", "--out", out, "--json", "-")
	o.want(t, ExitOK, "")
	var rep runJSON
	mustJSON(t, o.stdout, &rep)
	if !rep.Passed || len(rep.Suites) != len(job.Suites) {
		t.Fatalf("run: passed %v, %d suites:\n%s", rep.Passed, len(rep.Suites), o.stderr)
	}
	for _, s := range rep.Suites {
		if s.Passed == 0 || !s.OK() {
			t.Errorf("suite %s: %+v", s.Suite, s)
		}
	}
	if !strings.Contains(o.stderr, "history "+filepath.Join(out, "results.db")+" (run ") {
		t.Errorf("run did not store itself:\n%s", o.stderr)
	}
	return rep
}

// lookAtEveryPage loads each page of the exported site in headless Chromium and checks the
// DOM the browser built shows this run's data, and the screenshot is a drawn page.
func lookAtEveryPage(t *testing.T, site string) {
	t.Helper()
	if err := headless.Missing(); err != nil {
		t.Skip(err)
	}
	series, _ := filepath.Glob(filepath.Join(site, "series-*.html"))
	if len(series) != 7 {
		t.Fatalf("%d series pages, want one per bench row (7)", len(series))
	}
	var matmul string
	for _, p := range series {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "cpu/matmul") {
			matmul = filepath.Base(p)
		}
	}
	suiteRows := []string{}
	for _, s := range job.Suites {
		suiteRows = append(suiteRows, `data-suite="`+s+`"`)
	}
	pages := []struct {
		name string
		want []string
		// count: a pattern and how many times at least it must match.
		count map[string]int
		// ink: the share of the screenshot below the tab bar that must be drawn (0: 2%).
		ink float64
	}{
		{"index.html", append(suiteRows, `data-chaos="4"`, `data-stress="1"`, "<b>1</b> runs", ">7</a></b> series"), nil, 0},
		{"series.html", []string{"cpu/matmul", "cpu/softmax", "cpu/layernorm", "train-step/mlp/fwd+bwd", "train-step/transformer-block/fwd+bwd", "train-step/fno/fwd+bwd"},
			map[string]int{`class="series-row no-baseline"`: 7}, 0},
		{matmul, []string{"cpu/matmul", `data-level="no-baseline"`}, map[string]int{`<svg class="chart"`: 1}, 0},
		{"repro.html", []string{`data-status="stable"`, "chaos/inproc/corrupt-frame", "chaos/inproc/fno-dp2xtp2-corrupt-frame", "training/fno/dp2xtp2-inproc/repeat", "bench/cpu/matmul"},
			map[string]int{`data-status="stable"`: 1000}, 0},
		{"flaky.html", []string{`no flaky specs in 1 runs`}, nil, 0.005}, // a short page: a hint and one line
		{"metrics.html", []string{`id="chaos" data-kind="chaos" data-sections="4"`, `id="stress" data-kind="stress" data-sections="1"`,
			"inproc/corrupt-frame", "inproc/duplicate-frame", "inproc/nan-gradient", "inproc/fno-dp2xtp2-corrupt-frame", "time_to_detect_s", "time_to_recover_s",
			`data-group="latency"`, `data-group="leak-slopes"`, `data-empty="partitions"`, `data-empty="compile"`},
			map[string]int{`<svg class="chart"`: 10}, 0},
		{"collectives.html", []string{"inproc deterministic, 4 ranks", `data-group="all_reduce f32 sum"`},
			map[string]int{`<section class="coll-group"`: 10}, 0},
	}
	// "no data yet" is allowed only where the job measures nothing (GPU partitions, ptxas),
	// and there it must say so.
	empty := regexp.MustCompile(`no data yet(: [^<]*)?`)
	shots := t.TempDir()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2) // Chromium takes 3-4 s to start here; two at a time
	for _, p := range pages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			shot := filepath.Join(shots, strings.TrimSuffix(p.name, ".html")+".png")
			dom, err := headless.Browse("file://"+filepath.Join(site, p.name), shot)
			if err != nil {
				t.Errorf("%s: %v", p.name, err)
				return
			}
			if !strings.Contains(dom, "<nav>") {
				t.Errorf("%s: not a dashboard page:\n%.300s", p.name, dom)
			}
			for _, w := range p.want {
				if !strings.Contains(dom, w) {
					t.Errorf("%s: the DOM lacks %q", p.name, w)
				}
			}
			for pat, n := range p.count {
				if got := strings.Count(dom, pat); got < n {
					t.Errorf("%s: %d of %q, want >= %d", p.name, got, pat, n)
				}
			}
			for _, m := range empty.FindAllStringSubmatch(dom, -1) {
				if !strings.Contains(m[1], "tessera-qa run does not measure it") {
					t.Errorf("%s: says %q after a run that measured it", p.name, m[0])
				}
			}
			for _, bad := range []string{"no benchmark series yet", "no collectives runs yet", "no results with digests yet"} {
				if strings.Contains(dom, bad) {
					t.Errorf("%s: says %q", p.name, bad)
				}
			}
			colors, inked, err := headless.Ink(shot, 60)
			if p.ink == 0 {
				p.ink = 0.02
			}
			if err != nil || colors < 12 || inked < p.ink {
				t.Errorf("%s: the screenshot looks blank: %d colors, %.1f%% inked, %v", p.name, colors, 100*inked, err)
			}
		}()
	}
	wg.Wait()
}

// A run stored later (after --db none, or when the store was unreachable) is stored as `run`
// stores it: `report ingest RUNDIR` takes the run folder, results and measurements as one run.
func TestReportIngestTakesARunFolder(t *testing.T) {
	out := t.TempDir()
	o := cli(t, "run", "--backend", "cpu", "--suite", "smoke,bench", "--smoke", "2", "--seed", "1", "--out", out, "--db", "none", "--json", "-")
	o.want(t, ExitOK, "")
	var rep runJSON
	mustJSON(t, o.stdout, &rep)
	if len(rep.Measurements) != 1 || filepath.Base(rep.Measurements[0]) != job.BenchFile {
		t.Fatalf("measurements of a smoke and bench run: %v", rep.Measurements)
	}
	check := cli(t, "report", "ingest", "--check", rep.RunDir)
	check.want(t, ExitOK, "")
	db := filepath.Join(t.TempDir(), "h.db")
	o = cli(t, "report", "ingest", "--db", db, rep.RunDir)
	o.want(t, ExitOK, "")
	// 2 smoke and 7 bench results (6 timed cases and the profile), 7 bench rows: the same
	// count --check announced.
	if !strings.Contains(o.stdout, "run 1: "+rep.RunDir+" (results, 16 rows)") || !strings.Contains(check.stdout, "results, 16 rows") {
		t.Fatalf("ingest of a run folder:\n%s\n--check:\n%s", o.stdout, check.stdout)
	}
	o = cli(t, "report", "series", "--db", db, "--json", "-")
	var series []report.SeriesSummary
	mustJSON(t, o.stdout, &series)
	if len(series) != 7 {
		t.Fatalf("%d series from the run folder, want the bench suite's 7", len(series))
	}
	cli(t, "report", "ingest", "--db", db, out).want(t, ExitUsage, "E_INPUT") // DIR itself is not a run folder
}
