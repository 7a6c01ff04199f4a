package job

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/chaos"
	"github.com/tessera-qa/tessera-qa/collectives"
	"github.com/tessera-qa/tessera-qa/doctor"
	"github.com/tessera-qa/tessera-qa/engine/atomicfile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/report/parse"
	"github.com/tessera-qa/tessera-qa/stress"
)

// What the job measured besides verdicts, written into the run folder in the formats the
// reporter already reads (docs/reporter.md, "Ingest"), so the results store and the dashboard
// get them through the one ingest path: chaos.json (`tessera-qa chaos --json`: time to
// detect and recover per fault, restarts, lost steps), stress.json (`tessera-qa stress
// --json`: counts, leak slopes, latency alone and loaded), collectives.json (`tessera-qa
// collectives --json`: busbw per op and size) and bench.json (bench JSON: the bench suite's
// CPU ratios). Each is also a file a person can ingest or read alone.
const (
	ChaosFile       = "chaos.json"
	StressFile      = "stress.json"
	CollectivesFile = "collectives.json"
	BenchFile       = "bench.json"
	// DoctorFile is `tessera-qa doctor --json` of the doctor suite.
	DoctorFile = "doctor.json"
)

// measurements collects the suites' measurements; tasks add to it from worker goroutines.
type measurements struct {
	mu     sync.Mutex
	chaos  []*chaos.Report
	specs  []*chaos.Scenario
	stress *stress.Report
	coll   []collectives.Row
	bench  []parse.BenchRow
	doctor *doctor.Report
}

func (m *measurements) setDoctor(rep *doctor.Report) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.doctor = rep
}

func (m *measurements) addChaos(sc *chaos.Scenario, rep *chaos.Report) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.chaos, m.specs = append(m.chaos, rep), append(m.specs, sc)
}

func (m *measurements) setStress(rep *stress.Report) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stress = rep
}

func (m *measurements) addCollectives(row collectives.Row) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.coll = append(m.coll, row)
}

func (m *measurements) addBench(row parse.BenchRow) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bench = append(m.bench, row)
}

// write puts every non-empty measurement file into dir and returns their paths. Rows are
// sorted by name, so a file does not depend on which worker finished first.
func (m *measurements) write(dir string, started time.Time, command string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	host, _ := os.Hostname()
	var paths []string
	put := func(name string, v any) error {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return errs.New(errs.Internal, "%s: encode: %v", name, err)
		}
		p := filepath.Join(dir, name)
		if err := atomicfile.Write(p, append(b, '\n')); err != nil {
			return errs.New(errs.Input, "write %s: %v", p, err)
		}
		paths = append(paths, p)
		return nil
	}
	if len(m.chaos) > 0 {
		idx := make([]int, len(m.chaos))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return m.specs[idx[a]].Name < m.specs[idx[b]].Name })
		doc := chaos.Document{Schema: chaos.DocumentSchema, Kind: chaos.DocumentKind, Started: started.UTC(), Machine: host,
			Command: command + " (suite chaos)", Passed: true, BitsIdentical: true}
		for _, i := range idx {
			doc.Scenarios, doc.Specs = append(doc.Scenarios, m.chaos[i]), append(doc.Specs, m.specs[i])
			doc.Passed = doc.Passed && m.chaos[i].Passed
			doc.BitsIdentical = doc.BitsIdentical && m.chaos[i].BitsIdentical
		}
		doc.Summary = chaos.Summarize(doc.Scenarios, 5)
		if err := put(ChaosFile, doc); err != nil {
			return paths, err
		}
	}
	if m.stress != nil {
		if err := put(StressFile, m.stress); err != nil {
			return paths, err
		}
	}
	if m.doctor != nil {
		if err := put(DoctorFile, m.doctor); err != nil {
			return paths, err
		}
	}
	if len(m.coll) > 0 {
		rows := sortedRows(m.coll)
		rep := collectives.Report{Schema: collectives.ReportSchema, Kind: collectives.ReportKind, Started: started.UTC(), Machine: host,
			DeviceClass: "cpu/" + runtime.GOARCH, Command: command + " (suite collectives)", Seed: collectivesSeed, Iters: collectivesIters,
			Warmup: 1, Passed: true, Rows: rows}
		for _, r := range rows {
			rep.Passed = rep.Passed && r.OK
		}
		if err := put(CollectivesFile, rep); err != nil {
			return paths, err
		}
	}
	if len(m.bench) > 0 {
		rows := append([]parse.BenchRow(nil), m.bench...)
		sort.Slice(rows, func(a, b int) bool { return rows[a].Op < rows[b].Op })
		rep := parse.BenchReport{Schema: parse.BenchSchema, Kind: parse.BenchKind, Machine: host, DeviceClass: rows[0].Device,
			Started: started.UTC(), Rows: rows, Env: map[string]string{"ref": benchRef, "reps": strconv.Itoa(benchReps), "command": command + " (suite bench)"}}
		if err := put(BenchFile, rep); err != nil {
			return paths, err
		}
	}
	return paths, nil
}

// sortedRows orders collectives rows as the suite lists its cases: op, dtype, reduction,
// mode, count.
func sortedRows(in []collectives.Row) []collectives.Row {
	rows := append([]collectives.Row(nil), in...)
	slices.SortFunc(rows, func(a, b collectives.Row) int {
		return cmp.Or(cmp.Compare(a.Op, b.Op), cmp.Compare(a.DType, b.DType), cmp.Compare(a.RedOp, b.RedOp),
			cmp.Compare(a.Mode, b.Mode), cmp.Compare(a.Count, b.Count))
	})
	return rows
}

// RunFolderFiles lists what a run folder holds for the results store: its results.json and
// the measurement files present, in the order Run writes them. E_INPUT when dir is not a run
// folder (no marker: OutDir itself holds only copies of the latest results, without the
// measurements) or has no results.json (a run that did not finish).
func RunFolderFiles(dir string) (results string, measurements []string, err error) {
	if !fileExists(filepath.Join(dir, runMarker)) {
		hint := ""
		if dirExists(filepath.Join(dir, RunsDir)) {
			hint = fmt.Sprintf("; its runs are the folders in %s", filepath.Join(dir, RunsDir))
		}
		return "", nil, errs.New(errs.Input, "%s is not the folder of a `tessera-qa run` (no %s marker)%s", dir, runMarker, hint)
	}
	results = filepath.Join(dir, "results.json")
	if _, err := os.Stat(results); err != nil {
		return "", nil, errs.New(errs.Input, "run folder %s: no results.json (%v): not the folder of a finished `tessera-qa run`", dir, err)
	}
	for _, name := range []string{ChaosFile, StressFile, CollectivesFile, BenchFile, DoctorFile} {
		if p := filepath.Join(dir, name); fileExists(p) {
			measurements = append(measurements, p)
		}
	}
	return results, measurements, nil
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
