package property

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Properties run outside `go test` (the CLI) through rapid.Check with a Recorder as its TB:
// rapid needs only the TB interface, and a Recorder collects what rapid and the property
// report instead of printing it. FailNow ends the goroutine like testing.T does, so Run calls
// Check on a goroutine of its own.

// Recorder is a rapid.TB that records logs and failures.
type Recorder struct {
	name   string
	mu     sync.Mutex
	logs   []string
	errors []string
	failed bool
}

// NewRecorder returns a Recorder for a check called name (rapid names its fail file after it).
func NewRecorder(name string) *Recorder { return &Recorder{name: name} }

func (r *Recorder) Helper()      {}
func (r *Recorder) Name() string { return r.name }

func (r *Recorder) Logf(format string, args ...any) { r.Log(fmt.Sprintf(format, args...)) }
func (r *Recorder) Log(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprint(args...))
}

func (r *Recorder) Errorf(format string, args ...any) { r.Error(fmt.Sprintf(format, args...)) }
func (r *Recorder) Error(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprint(args...))
	r.failed = true
}

func (r *Recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); r.FailNow() }
func (r *Recorder) Fatal(args ...any)                 { r.Error(args...); r.FailNow() }
func (r *Recorder) Fail()                             { r.mu.Lock(); r.failed = true; r.mu.Unlock() }
func (r *Recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *Recorder) Failed() bool                      { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }

// Skip and its variants end the check like FailNow without failing it; rapid.Check does not
// call them.
func (r *Recorder) Skipf(format string, args ...any) { r.Logf(format, args...); runtime.Goexit() }
func (r *Recorder) Skip(args ...any)                 { r.Log(args...); runtime.Goexit() }
func (r *Recorder) SkipNow()                         { runtime.Goexit() }

// Errors returns what was reported through Error and Errorf (rapid's failure report).
func (r *Recorder) Errors() []string { r.mu.Lock(); defer r.mu.Unlock(); return slices.Clone(r.errors) }

// Logs returns what was logged (rapid's log of the minimal failing case ends up here).
func (r *Recorder) Logs() []string { r.mu.Lock(); defer r.mu.Unlock(); return slices.Clone(r.logs) }

// Verdicts of an Outcome.
const (
	Pass = "pass"
	Fail = "fail"
	Skip = "skip"
)

// Outcome is one property on one backend (the CLI's table row and its JSON).
type Outcome struct {
	Property  string  `json:"property"`
	Backend   string  `json:"backend"`
	Judged    string  `json:"judged"`
	Verdict   string  `json:"verdict"`
	Checks    int     `json:"checks"`
	Passed    int     `json:"passed"`
	Failed    int     `json:"failed"`
	Discarded int     `json:"discarded"`
	Seed      uint64  `json:"seed,string"`
	Seconds   float64 `json:"seconds"`
	Reason    string  `json:"reason,omitempty"`
	// Report is rapid's whole failure report, with the minimal case's log.
	Report string `json:"report,omitempty"`
	// Replay is the replay manifest of the minimal failing case, FailFile rapid's fail file.
	Replay   string `json:"replay,omitempty"`
	FailFile string `json:"fail_file,omitempty"`
}

// RunOptions configure Run.
type RunOptions struct {
	Properties []Property
	Backends   []backend.Backend
	Config     Config
	Checks     int    // per property; 0 means each property's own Checks
	Seed       uint64 // base seed: each (property, backend) gets harness.SubSeed(Seed, "property/backend")
	Artifacts  string // replay manifests and fail files of failing properties
	FailFile   string // replay this rapid fail file first (with one property)
	NoEdges    bool   // random cases from the first draw: no edge schedule (Options.NoEdges)
	// Progress, when set, receives each outcome as soon as it is known.
	Progress func(Outcome)
}

// PropertySeed is the rapid seed Run uses for property p on backend b.
func PropertySeed(base uint64, p, b string) uint64 { return harness.SubSeed(base, p+"/"+b) }

// Run checks every property on every backend, one at a time, and returns the outcomes in
// that order. A backend that is not available gives skip outcomes.
func Run(o RunOptions) []Outcome {
	var out []Outcome
	for _, p := range o.Properties {
		for _, b := range o.Backends {
			oc := runOne(o, p, b)
			if o.Progress != nil {
				o.Progress(oc)
			}
			out = append(out, oc)
		}
	}
	return out
}

func runOne(o RunOptions, p Property, b backend.Backend) Outcome {
	oc := Outcome{Property: p.Name, Backend: b.Name(), Judged: p.Judged, Verdict: Pass, Seed: PropertySeed(o.Seed, p.Name, b.Name())}
	if err := b.Available(); err != nil {
		oc.Verdict, oc.Reason = Skip, err.Error()
		return oc
	}
	manifest := ""
	if o.Artifacts != "" {
		manifest = filepath.Join(o.Artifacts, harness.ManifestFileName(harness.Manifest{Suite: Suite, Case: caseName(p.Name), Backend: b.Name()}))
		os.Remove(manifest) // a manifest left by an earlier run must not pass for this one's
	}
	rec := NewRecorder("tessera-qa-prop/" + p.Name + "/" + b.Name())
	var tally Tally
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(rec, p, Env{Backend: b, Config: o.Config, Artifacts: o.Artifacts},
			Options{Checks: o.Checks, Seed: oc.Seed, FailFile: o.FailFile, NoEdges: o.NoEdges, Tally: &tally})
	}()
	<-done
	oc.Seconds = time.Since(start).Seconds()
	oc.Checks, oc.Passed, oc.Failed, oc.Discarded = tally.Checks(), tally.Passed, tally.Failed, tally.Discarded
	if !rec.Failed() {
		return oc
	}
	oc.Verdict = Fail
	if oc.Failed == 0 { // failed outside a case: a generator bug, rapid giving up on filters
		oc.Failed, oc.Checks = 1, oc.Checks+1
	}
	oc.Report = strings.Join(append(rec.Errors(), rec.Logs()...), "\n")
	oc.Reason = firstReason(rec.Errors())
	if manifest != "" {
		if _, err := os.Stat(manifest); err == nil {
			oc.Replay = manifest
		}
	}
	oc.FailFile = tally.FailFile // Check moved it into o.Artifacts
	if oc.FailFile == "" {
		oc.FailFile = adoptFailFile(rec.Name(), o.Artifacts)
	}
	return oc
}

// firstReason is the failure message of rapid's report on one line, without the
// reproduction advice (the CLI prints its own).
func firstReason(errors []string) string {
	if len(errors) == 0 {
		return "failed"
	}
	msg, _, _ := strings.Cut(errors[0], "To reproduce")
	msg = strings.TrimSpace(msg)
	if i := strings.Index(msg, "tests: "); strings.HasPrefix(msg, "[rapid]") && i >= 0 {
		msg = msg[i+len("tests: "):]
	}
	lines := strings.Fields(msg)
	s := strings.Join(lines, " ")
	if len(s) > 600 {
		s = s[:600] + "..."
	}
	return s
}

// AdoptFailFile is adoptFailFile for a spec that calls rapid.Check itself: deferred after a
// check named name, it moves a fail file rapid wrote into dir/rapid/ and returns its path.
func AdoptFailFile(name, dir string) string { return adoptFailFile(name, dir) }

// adoptFailFile moves the fail file rapid wrote for check name (testdata/rapid/NAME/NAME-*.fail
// under the working directory, names made file-safe as rapid does) into dir/rapid/, removes
// the directories rapid created if they are now empty, and returns the new path ("" if rapid
// wrote none). Without a dir the file stays where rapid put it.
func adoptFailFile(name, dir string) string {
	safe := rapidSafe(name)
	src := filepath.Join("testdata", "rapid", safe)
	matches, _ := filepath.Glob(filepath.Join(src, safe+"-*.fail"))
	if len(matches) == 0 {
		return ""
	}
	slices.Sort(matches) // names carry a timestamp: the last is the newest
	newest := matches[len(matches)-1]
	if dir == "" {
		return newest
	}
	dst := filepath.Join(dir, "rapid", filepath.Base(newest))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil || moveFile(newest, dst) != nil {
		return newest
	}
	for _, d := range []string{src, filepath.Dir(src), "testdata"} {
		os.Remove(d) // only succeeds when empty
	}
	return dst
}

// rapidSafe is how rapid makes a test name file-safe: letters, digits, '-' and '_' stay.
func rapidSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteRune('_')
		}
	}
	return b.String()
}

func moveFile(src, dst string) error {
	if os.Rename(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Remove(src)
}
