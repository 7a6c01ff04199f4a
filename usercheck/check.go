package usercheck

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/property"
)

// Suite is the harness.Result suite of every row (and of its replay manifests).
const Suite = "check"

// Check names: a row's Case is "GRAPH/CHECK" (CHECK may hold more slashes: metamorphic/NAME).
const (
	CheckVerify       = "verify"
	CheckCompile      = "compile"
	CheckRun          = "run"
	CheckGolden       = "golden"
	CheckDetInProcess = "determinism/in-process"
	CheckDetProcess   = "determinism/process"
	CheckDetBackends  = "determinism/backends"
	CheckDifferential = "differential"
	CheckGradients    = "gradients"
	CheckMetamorphic  = "metamorphic"
	CheckSharded      = "sharded"
)

// Oracle choices of Options.Oracle.
const (
	OracleAuto = "auto" // torch when it starts here, else a skip row that says why
	OracleNone = "none"
)

// Options say what to check and where.
type Options struct {
	Graph *graph.Graph
	// Inputs are the graph's inputs (from --in); nil draws them from Seed with
	// harness.RandomInputs.
	Inputs map[string]*tensor.Tensor
	Seed   uint64
	// Backends are the backends to run on; nil means every registered one (an unavailable
	// one gives skip rows with its reason).
	Backends []backend.Backend
	// Oracle is torch, jax, OracleAuto ("" too) or OracleNone. An explicitly named oracle
	// that cannot start is an error (E_NO_DEVICE); auto turns that into a skip row.
	Oracle, Python string
	// Mesh ("tp=2") and Layouts (input name -> layout text) add the sharded check.
	Mesh    string
	Layouts map[string]string
	// Artifacts receives replay manifests and compile dumps; "" writes none (rows say so).
	Artifacts string
	// Self is the program the second-process determinism check starts as
	// `Self exec GRAPH --in IN --out OUT --backend B --json -`; "" skips that row.
	// SelfEnv is added to its environment.
	Self    string
	SelfEnv []string
	// MetaChecks is the number of cases each metamorphic relation draws (0: DefaultMetaChecks).
	MetaChecks int
	// Timeout bounds the second process and each oracle request (0: DefaultTimeout).
	Timeout time.Duration
	// Progress, when set, receives each row as soon as it is known.
	Progress func(harness.Result)
}

// DefaultMetaChecks keeps a check of one graph in seconds: each relation's own suite draws
// hundreds of cases; here it is a smoke test of the graph's ops.
const DefaultMetaChecks = 20

// DefaultTimeout bounds the second process and oracle requests.
const DefaultTimeout = 2 * time.Minute

// Report is what Run found: one row per check and backend.
type Report struct {
	Graph string
	Seed  uint64
	// RandomInputs is true when the inputs were drawn from Seed.
	RandomInputs bool
	Rows         []harness.Result
}

// Failed reports whether any row failed or errored.
func (r Report) Failed() bool {
	return slices.ContainsFunc(r.Rows, func(x harness.Result) bool { return x.Failed() })
}

// CheckName is a row's check: its case without the graph name.
func CheckName(r harness.Result) string {
	_, c, ok := strings.Cut(r.Case, "/")
	if !ok {
		return r.Case
	}
	return c
}

// state is one Run in progress.
type state struct {
	o      Options
	g      *graph.Graph
	in     map[string]*tensor.Tensor
	want   []*tensor.Tensor    // the golden model's outputs
	tols   []harness.Tolerance // per output, against the golden model
	rep    *Report
	digest map[string][]string // backend -> output digests of its first run
	class  map[string]string   // backend -> device class
}

// Run checks o.Graph. It returns an error only for bad input (E_INPUT, E_SHAPE ...) or an
// explicitly named oracle that cannot start (E_NO_DEVICE); everything the graph or engine gets
// wrong is a failing row.
func Run(o Options) (*Report, error) {
	if o.Graph == nil {
		return nil, errs.New(errs.Input, "check: no graph")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MetaChecks <= 0 {
		o.MetaChecks = DefaultMetaChecks
	}
	switch o.Oracle {
	case "":
		o.Oracle = OracleAuto
	case OracleAuto, OracleNone, "torch", "jax":
	default:
		return nil, errs.New(errs.Input, "check: oracle %q: want torch, jax, auto or none", o.Oracle)
	}
	if o.Backends == nil {
		o.Backends = backend.All()
	}
	s := &state{o: o, g: o.Graph, rep: &Report{Graph: o.Graph.Name, Seed: o.Seed}, digest: map[string][]string{}, class: map[string]string{}}
	if err := s.inputs(); err != nil {
		return nil, err
	}
	if !s.verify() {
		return s.rep, nil
	}
	if !s.compile() {
		return s.rep, nil
	}
	if err := s.golden(); err != nil {
		return nil, err
	}
	for _, b := range o.Backends {
		s.backendRows(b)
	}
	s.acrossBackends()
	if err := s.differential(); err != nil {
		return nil, err
	}
	return s.rep, nil
}

func (s *state) inputs() error {
	if s.o.Inputs != nil {
		if err := graph.CheckInputs(s.g, s.o.Inputs); err != nil {
			return errs.Wrap(errs.Input, err, "check %s", s.g.Name)
		}
		s.in = s.o.Inputs
		return nil
	}
	in, err := harness.RandomInputs(s.g, s.o.Seed, nil)
	if err != nil {
		return err
	}
	s.in, s.rep.RandomInputs = in, true
	return nil
}

// row makes a result for check on b (nil: a check of the graph itself, recorded on the host).
func (s *state) row(check string, b backend.Backend, verdict, reason string) harness.Result {
	env := harness.CaptureEnv(b)
	r := harness.Result{Schema: harness.ResultSchema, Suite: Suite, Case: s.g.Name + "/" + check, Labels: []string{Suite, check},
		Seed: s.o.Seed, Verdict: verdict, Reason: reason, Outputs: []harness.OutputResult{}, Env: env,
		Backend: env.Backend, Device: env.Device, DeviceClass: env.DeviceClass}
	if b == nil {
		r.DeviceClass = "host"
	}
	return r
}

func (s *state) add(r harness.Result) {
	if r.Verdict == harness.VerdictFail || r.Verdict == harness.VerdictError {
		if r.ErrorCode == "" && r.Verdict == harness.VerdictError {
			r.ErrorCode = string(errs.Internal)
		}
	}
	s.rep.Rows = append(s.rep.Rows, r)
	if s.o.Progress != nil {
		s.o.Progress(r)
	}
}

func (s *state) errRow(check string, b backend.Backend, verdict string, err error) harness.Result {
	r := s.row(check, b, verdict, err.Error())
	r.ErrorCode = string(errs.CodeOf(err))
	return r
}

func (s *state) verify() bool {
	if err := graph.Verify(s.g); err != nil {
		s.add(s.errRow(CheckVerify, nil, harness.VerdictFail, err))
		return false
	}
	s.add(s.row(CheckVerify, nil, harness.VerdictPass, fmt.Sprintf("%d nodes, %d inputs, %d outputs", len(s.g.Nodes), len(s.g.Inputs), len(s.g.Outputs))))
	return true
}

// compile compiles once with every pass dumped; on failure the dump up to the failing pass
// goes to the artifacts folder.
func (s *state) compile() bool {
	var dump bytes.Buffer
	var p *compiler.Program
	err := protect("compile", func() (err error) {
		p, err = compiler.Compile(s.g, compiler.Options{Dump: &dump, DumpAfter: []string{"all"}})
		return err
	})
	if err != nil {
		r := s.errRow(CheckCompile, nil, harness.VerdictFail, err)
		if s.o.Artifacts != "" {
			path := filepath.Join(s.o.Artifacts, harness.ManifestFileName(harness.Manifest{Suite: Suite, Case: s.g.Name + "/compile", Backend: "dump"}))
			path = strings.TrimSuffix(path, ".replay.json") + ".txt"
			text := "# graph\n" + graph.Print(s.g) + "\n# program after each pass that ran\n" + dump.String() + "\n# error\n" + err.Error() + "\n"
			if werr := writeFile(path, []byte(text)); werr == nil {
				r.Replay = path
				r.Reason += " (program dump: " + path + ")"
			}
		}
		s.add(r)
		return false
	}
	s.add(s.row(CheckCompile, nil, harness.VerdictPass, fmt.Sprintf("%d kernels, schedule %.12s", len(p.Kernels), p.ScheduleHash)))
	return true
}

// golden runs the float64 golden model once and derives each output's tolerance: the
// harness's default for its dtype scaled for the longest reduction upstream of it and for
// data below unit scale (property.Tolerance, the policy of the random-graph checks).
func (s *state) golden() error {
	err := protect("golden model", func() (err error) { s.want, err = ref.Run(s.g, s.in); return })
	if err != nil {
		return errs.Wrap(errs.Input, err, "check %s: the golden model cannot run this graph", s.g.Name)
	}
	k := property.Reductions(s.g)
	for i, w := range s.want {
		s.tols = append(s.tols, property.Tolerance(w.DType, k[i], w))
	}
	return nil
}

// harnessCase is the graph as a harness case named for check.
func (s *state) harnessCase(check string) harness.Case {
	return harness.Case{Suite: Suite, Name: s.g.Name + "/" + check, Graph: s.g, Inputs: s.in, Seed: s.o.Seed,
		Tolerances: slices.Clone(s.tols), Labels: []string{Suite, check}}
}

// backendRows are the rows of one backend: run, golden, determinism, gradients, relations,
// sharded.
func (s *state) backendRows(b backend.Backend) {
	per := []string{CheckRun, CheckGolden, CheckDetInProcess, CheckDetProcess, CheckGradients, CheckMetamorphic, CheckSharded}
	if err := b.Available(); err != nil {
		for i, c := range per {
			reason := "backend " + b.Name() + " unavailable (see run)"
			if i == 0 {
				reason = "backend " + b.Name() + " unavailable: " + err.Error()
			}
			r := s.row(c, b, harness.VerdictSkip, reason)
			r.ErrorCode = string(errs.CodeOf(err))
			s.add(r)
		}
		return
	}
	res := harness.Runner{Backend: b, ArtifactsDir: s.o.Artifacts}.Run(s.harnessCase(CheckGolden))
	if res.Verdict == harness.VerdictError {
		run := res
		run.Case, run.Labels = s.g.Name+"/"+CheckRun, []string{Suite, CheckRun}
		s.add(run)
		for _, c := range per[1:] {
			s.add(s.row(c, b, harness.VerdictSkip, "the graph did not run on "+b.Name()))
		}
		return
	}
	run := s.row(CheckRun, b, harness.VerdictPass, fmt.Sprintf("%d outputs in %.1f ms, digest %.16s", len(res.Outputs), res.Timing.RunMS, res.Digest))
	run.Digest, run.ScheduleHash, run.Computation, run.InputDigests = res.Digest, res.ScheduleHash, res.Computation, res.InputDigests
	s.add(run)
	if res.Verdict == harness.VerdictPass {
		res.Reason = "every output within tolerance of the float64 golden model (" + worst(res) + ")"
	}
	s.add(noReplayNote(res))
	digests := make([]string, len(res.Outputs))
	for i, o := range res.Outputs {
		digests[i] = o.Digest
	}
	s.digest[b.Name()], s.class[b.Name()] = digests, b.DeviceClass()
	s.inProcess(b, digests)
	s.otherProcess(b, digests)
	s.gradients(b)
	s.metamorphic(b)
	s.sharded(b)
}

// worst summarizes each output's worst error against its allowance.
func worst(r harness.Result) string {
	var parts []string
	for _, o := range r.Outputs {
		parts = append(parts, fmt.Sprintf("%%%s %s: max abs %.2g, max ulp %d", o.Name, o.Check.Mode, o.Check.MaxAbs, o.Check.MaxULP))
	}
	return strings.Join(parts, ", ")
}

// noReplayNote says so on a failing row without a manifest.
func noReplayNote(r harness.Result) harness.Result {
	if r.Failed() && r.Replay == "" && !strings.Contains(r.Reason, "replay") {
		r.Reason += " (no replay manifest: pass --artifacts DIR)"
	}
	return r
}

// inProcess runs the graph a second time in this process (compiled afresh) and wants the
// first run's bits.
func (s *state) inProcess(b backend.Backend, digests []string) {
	c := s.harnessCase(CheckDetInProcess)
	c.Tolerances, c.ExpectDigests = nil, digests
	r := harness.Runner{Backend: b, ArtifactsDir: s.o.Artifacts}.Run(c)
	if r.Verdict == harness.VerdictPass {
		r.Reason = "a second run, compiled afresh, gave the same bits"
	}
	s.add(noReplayNote(r))
}

// writeFile writes data to path, creating its folder.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// protect turns a panic in f into a coded error naming the stage.
func protect(stage string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errs.New(errs.Internal, "panic during %s: %v", stage, p)
		}
	}()
	return f()
}
