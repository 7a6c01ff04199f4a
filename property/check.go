package property

import (
	"flag"
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// rapid reads its settings (checks, seed, shrink time, fail file) from package-level flags
// registered on flag.CommandLine, with RAPID_* environment variables as their defaults.
// Check sets them for one property and restores them afterwards, so that each property gets
// its own number of checks. A value the user gave explicitly (-rapid.checks=N on the test
// command line, or RAPID_CHECKS) always wins over a property's default.

// Options tune one Check.
type Options struct {
	// Checks is the number of cases to draw; 0 means the property's own Checks.
	Checks int
	// Seed seeds rapid's search; 0 means -rapid.seed / RAPID_SEED if given, else random.
	Seed uint64
	// ShrinkTime bounds the minimization of a failing case; 0 means 20 s.
	ShrinkTime time.Duration
	// FailFile replays a fail file rapid wrote earlier before the search (-rapid.failfile).
	FailFile string
	// Tally, when set, counts the property's cases (the CLI's table).
	Tally *Tally
	// NoEdges skips the edge schedule (edges.go): random cases from the first draw. A replay
	// (FailFile, or -rapid.seed / RAPID_SEED given by the user) always does, since the
	// schedule numbers the draws of a whole run, which a replay of one case does not make.
	NoEdges bool
}

// Tally counts one Check's cases: Passed before the first failure, Failed (0 or 1: rapid stops
// at the first failure and then only shrinks it), Discarded draws the generator filtered out.
type Tally struct {
	Passed, Failed, Discarded int
	// FailFile is where rapid's fail file of a failure was moved (under Env.Artifacts).
	FailFile string
}

// Checks is the number of cases a property run draws.
func (t *Tally) Checks() int { return t.Passed + t.Failed }

var (
	checkMu  sync.Mutex
	userOnce sync.Once
	userSet  map[string]bool // rapid flags set on the command line or by RAPID_* variables
)

// initFlags makes rapid usable outside `go test` (the CLI): rapid calls testing.Short, which
// panics unless the testing flags exist and flag.CommandLine was parsed. It also records
// which rapid flags the user set before Check touches any.
func initFlags() {
	userOnce.Do(func() {
		testing.Init()
		if !flag.Parsed() {
			_ = flag.CommandLine.Parse(nil)
		}
		userSet = map[string]bool{}
		flag.Visit(func(f *flag.Flag) { userSet[f.Name] = true })
		for flagName, env := range map[string]string{"rapid.checks": "RAPID_CHECKS", "rapid.seed": "RAPID_SEED",
			"rapid.shrinktime": "RAPID_SHRINKTIME", "rapid.failfile": "RAPID_FAILFILE"} {
			if _, ok := os.LookupEnv(env); ok {
				userSet[flagName] = true
			}
		}
	})
}

// Check runs property p against e under tb with rapid.Check: it draws cases until o.Checks
// passed or one failed, then shrinks the failure to a minimal case and fails tb with it
// (rapid's fail file and the property's replay manifest end up in e.Artifacts; without
// Artifacts the fail file stays where rapid writes it, testdata/rapid/ of the working
// directory). tb is GinkgoT() in the suite, a
// *testing.T in tests, or a Recorder in the CLI.
func Check(tb rapid.TB, p Property, e Env, o Options) {
	tb.Helper()
	initFlags()
	checkMu.Lock()
	defer checkMu.Unlock()
	set := map[string]string{}
	if !userSet["rapid.checks"] {
		n := o.Checks
		if n <= 0 {
			n = p.Checks
		}
		set["rapid.checks"] = strconv.Itoa(n)
	}
	if o.Seed != 0 && !userSet["rapid.seed"] {
		set["rapid.seed"] = strconv.FormatUint(o.Seed, 10)
	}
	if !userSet["rapid.shrinktime"] {
		d := o.ShrinkTime
		if d <= 0 {
			d = 20 * time.Second
		}
		set["rapid.shrinktime"] = d.String()
	}
	if o.FailFile != "" {
		set["rapid.failfile"] = o.FailFile
	}
	for name, v := range set {
		old := flag.Lookup(name).Value.String()
		if err := flag.Set(name, v); err != nil {
			tb.Fatalf("prop: set -%s=%s: %v", name, v, err)
		}
		defer flag.Set(name, old) //nolint:errcheck // restoring a value the flag held before
	}
	edges := &edgeCursor{}
	if o.NoEdges || o.FailFile != "" || userSet["rapid.seed"] || userSet["rapid.failfile"] {
		edges.next, edges.cur = math.MaxInt, math.MaxInt
	}
	e.Config.edges = edges
	if e.Config.Runs == nil && e.Backend != nil && e.Backend.Name() == "cuda" {
		e.Config.Runs = ptx.Lowers // the cuda backend runs what the code generator lowers
	}
	body := p.Body(e)
	tally := o.Tally
	if tally == nil {
		tally = &Tally{}
	}
	failing := false
	// rapid writes the fail file of a failure into testdata/rapid/ of the working directory,
	// which under `go test` is the package's source folder: move it into the run's artifacts
	// (issue 13: a failing property run must not leave files in the checkout). Deferred, so
	// that it also happens when the failure ends the spec by panicking (Ginkgo) or by
	// runtime.Goexit (testing.T.FailNow).
	defer func() {
		if e.Artifacts != "" {
			if p := adoptFailFile(tb.Name(), e.Artifacts); p != "" {
				tally.FailFile = p
				tb.Logf("rapid's fail file moved out of the checkout to %s (replay with -rapid.failfile=%s)", p, p)
			}
		}
	}()
	rapid.Check(&deferTB{TB: tb}, func(t *rapid.T) {
		edges.begin(failing)
		defer func() {
			if r := recover(); r != nil {
				// rapid panics with its unexported invalidData when a filtered generator
				// finds no case, and with stopTest (or anything else) on a failure.
				if fmt.Sprintf("%T", r) == "rapid.invalidData" {
					if !failing {
						tally.Discarded++
					}
				} else if !failing {
					failing = true
					tally.Failed = 1
				}
				panic(r)
			}
			switch {
			case t.Failed() && !failing:
				failing = true
				tally.Failed = 1
			case !failing:
				tally.Passed++
			}
		}()
		body(t)
	})
}

// deferTB holds back failures reported through Error and Errorf until FailNow. rapid reports
// a failure with Errorf and then re-runs the minimal case to log its draws; GinkgoT's Errorf
// ends the spec at once, which would lose that log. Through deferTB the log comes first and
// the failure, with rapid's whole message, ends the check when rapid calls FailNow.
type deferTB struct {
	rapid.TB
	mu     sync.Mutex
	errs   []string
	failed bool
}

func (d *deferTB) Errorf(format string, args ...any) { d.Error(fmt.Sprintf(format, args...)) }
func (d *deferTB) Error(args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs = append(d.errs, fmt.Sprint(args...))
	d.failed = true
}
func (d *deferTB) Fail()                             { d.mu.Lock(); d.failed = true; d.mu.Unlock() }
func (d *deferTB) Failed() bool                      { d.mu.Lock(); defer d.mu.Unlock(); return d.failed || d.TB.Failed() }
func (d *deferTB) Fatalf(format string, args ...any) { d.Errorf(format, args...); d.FailNow() }
func (d *deferTB) Fatal(args ...any)                 { d.Error(args...); d.FailNow() }

func (d *deferTB) FailNow() {
	d.mu.Lock()
	msg := strings.Join(d.errs, "\n")
	d.mu.Unlock()
	if msg == "" {
		d.TB.FailNow()
	}
	d.TB.Fatal(msg)
}
