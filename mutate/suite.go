package mutate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Kind is how a suite is built and run.
type Kind int

const (
	// KindGinkgo: a Ginkgo suite, built with go test -c and run with a JSON report.
	KindGinkgo Kind = iota + 1
	// KindGoTest: plain Go tests, built with go test -c; a non-zero exit is a catch.
	KindGoTest
	// KindSmoke: the smoke job of `tessera-qa run`, from a failpoints build of the CLI.
	KindSmoke
)

// Suite is something CI runs on a CPU machine that may catch a planted fault.
type Suite struct {
	Name string `json:"name"`
	Kind Kind   `json:"-"`
	// Packages are the directories (relative to the module root) built into binaries: test
	// packages, or the CLI's main package for KindSmoke.
	Packages []string `json:"packages"`
	What     string   `json:"what"`
	// OpLabels: the suite labels each spec with its op, so a run can focus on the ops a
	// fault touches (Options.FocusOps).
	OpLabels bool `json:"-"`
	// Args are extra arguments for the suite's binaries, Env extra environment.
	Args []string `json:"-"`
	Env  []string `json:"-"`
	// Judges: the suite holds the unit tests of the harness's own judges. It runs against the
	// judge layer's faults only, and they against such suites only (applies).
	Judges bool `json:"judges,omitempty"`
}

// suites is every suite the mutation check knows, in the order a fault meets them when a run
// stops at the first catch: the harness suites first, the engine's own unit tests last.
var suites = []Suite{
	{Name: "golden", Kind: KindGinkgo, Packages: []string{"suites/golden"}, OpLabels: true,
		What: "every golden case against its golden file (suites/golden)"},
	{Name: "rewrite", Kind: KindGinkgo, Packages: []string{"suites/rewrite"},
		What: "near-miss and matching graphs of every rewrite, structurally and numerically (suites/rewrite)"},
	{Name: "rounding", Kind: KindGinkgo, Packages: []string{"suites/rounding"},
		What: "every encoding path bit for bit against an independent encoder (suites/rounding)"},
	{Name: "determinism", Kind: KindGinkgo, Packages: []string{"suites/determinism"}, OpLabels: true,
		What: "same bits run after run, in a second process, under GOMAXPROCS 1, 2, 8, and as pinned for the device class in golden/pins (suites/determinism)"},
	{Name: "spectral", Kind: KindGinkgo, Packages: []string{"suites/spectral"},
		What: "FFT accuracy against a float64 reference with the error-growth fit, metamorphic properties (suites/spectral)"},
	// rapid would leave a fail file in the source tree for every fault it catches, and CI
	// would replay them all.
	{Name: "property", Kind: KindGinkgo, Packages: []string{"suites/property"}, Args: []string{"-rapid.nofailfile"},
		What: "random graphs against engine/ref, metamorphic relations (suites/property)"},
	{Name: "differential", Kind: KindGinkgo, Packages: []string{"suites/differential"},
		What: "every op against the PyTorch oracle (suites/differential; skips without torch)"},
	{Name: "smoke", Kind: KindSmoke, Packages: []string{"cmd/tessera-qa"},
		What: "tessera-qa run --suite smoke: random registry graphs against engine/ref"},
	// Only the specs that compare data- and tensor-parallel training with one rank: the rest
	// of the suite runs the CLI, which a failpoints build of the suite does not carry.
	{Name: "training", Kind: KindGinkgo, Packages: []string{"suites/training"},
		Args: []string{"-ginkgo.focus=as one rank|as torch.optim|pinned for this device class"}, Env: []string{"TESSERA_QA_BIN=-"},
		What: "data-parallel and tensor-parallel training against one rank on the whole batch, every optimizer configuration against torch.optim's algorithm (suites/training)"},
	// Issue 27: pipeline-parallel training against the unpipelined run, all in process.
	{Name: "pipeline", Kind: KindGinkgo, Packages: []string{"suites/pipeline"},
		What: "pipeline-parallel training against the unpipelined run: every rank's gradients, the gradient norm over micro-batch counts and pp sizes, bits over tcp (suites/pipeline)"},
	{Name: "moe", Kind: KindGinkgo, Packages: []string{"suites/moe"},
		What: "mixture-of-experts training against one rank, an independent float64 reference and across backends: gradients over ep sizes, capacity, exact ties, a rank without tokens (suites/moe)"},
	{Name: "sharded", Kind: KindGinkgo, Packages: []string{"suites/sharded"}, Args: []string{"-ginkgo.focus=Each rule of the shard pass|sharded catalogue|pencil 2-D FFT"},
		What: "each rule of the shard pass under every legal layout of its inputs against one device (suites/sharded)"},
	// Only the frame-field specs: the rest of the suite runs the CLI.
	{Name: "frames", Kind: KindGinkgo, Packages: []string{"suites/collectives"},
		Args: []string{"-ginkgo.focus=header field"}, Env: []string{"TESSERA_QA_BIN=-"},
		What: "a frame wrong in one header field, refused naming the field, on inproc and tcp (suites/collectives)"},
	// Issue 21: negative tests (invalid graphs, one-edit graphs) and the NumPy round trip.
	// The verifier suite labels each spec with its op, so that a fault runs only its cases;
	// TESSERA_QA_BIN=- leaves out its CLI specs, which a failpoints build does not carry.
	{Name: "verifier", Kind: KindGinkgo, Packages: []string{"suites/verifier"}, OpLabels: true,
		Args: []string{"-rapid.nofailfile"}, Env: []string{"TESSERA_QA_BIN=-"},
		What: "invalid graphs refused with their code, one-edit graphs refused or agreeing with engine/ref (suites/verifier)"},
	// Issue 25: the SDC scan runs the pinned catalogue's matmul cases on two CPU devices.
	{Name: "doctor", Kind: KindGinkgo, Packages: []string{"suites/doctor"}, Args: []string{"-ginkgo.focus=SDC"},
		What: "doctor's SDC scan: every device's catalogue bits against the pins (suites/doctor)"},
	{Name: "numpyio", Kind: KindGinkgo, Packages: []string{"suites/numpyio"}, OpLabels: true,
		What: "engine-written .npy/.npz read by NumPy and NumPy-written ones read by the engine, bit for bit (suites/numpyio; skips without numpy)"},
	// Issue 22: only the bitwise specs (every collective against collectives/bitref), in
	// process (the rest of the suite runs the CLI), and of those past the pipeline's segments
	// only the 3-rank one, the cheapest. They are labelled with the collectives' op names, so a
	// fault of another layer runs none of them.
	{Name: "collectives", Kind: KindGinkgo, Packages: []string{"suites/collectives"}, OpLabels: true,
		Args: []string{"-ginkgo.focus=bit for bit (against|past.* on 3 ranks)"}, Env: []string{"TESSERA_QA_BIN=-"},
		What: "every collective, mode, reduction, dtype and world size bit for bit against collectives/bitref, at small sizes and past the pipeline's segments (suites/collectives)"},
	// Issue 24: the profiler's own suite, in process: every launch recorded once with its
	// grid, profiled bits equal to plain bits, every trace valid.
	{Name: "profile", Kind: KindGinkgo, Packages: []string{"suites/profile"},
		What: "profiled runs keep their bits, record every launch once with the grid its Tile IR gives it, and write valid Perfetto traces (suites/profile)"},
	{Name: "engine", Kind: KindGoTest, Packages: []string{"engine/compiler", "engine/backend/cpu", "engine/graph", "engine/numerics"},
		What: "unit tests of the packages that hold the hooks (engine/compiler, engine/backend/cpu, engine/graph, engine/numerics)"},
	// The judges' own tests, only those of the decisions the judge layer plants faults in: the
	// rest (soaks, ingest, the dashboard) take most of these packages' time and judge nothing
	// a judge fault changes.
	{Name: "judges", Kind: KindGoTest, Packages: []string{"chaos", "stress", "collectives", "report"}, Judges: true,
		Args: []string{"-test.run=^Test(Check|Judge|WrongDigest|PerfLevels|ReproTracker|GateFailures)"},
		What: "unit tests of the harness's judges: the chaos checker, stress's digest and leak rules, the collectives reference, the reporter's perf levels, acks, repro tracker and flaky list"},
}

// Suites returns every suite the mutation check knows.
func Suites() []Suite {
	out := slices.Clone(suites)
	for i := range out {
		out[i].Packages, out[i].Args = slices.Clone(out[i].Packages), slices.Clone(out[i].Args)
	}
	return out
}

// SuiteNames lists the suite names, in order.
func SuiteNames() []string {
	var out []string
	for _, s := range suites {
		out = append(out, s.Name)
	}
	return out
}

// SelectSuites returns the named suites in the order given (all, in Suites order, for no
// names). An unknown name is E_INPUT.
func SelectSuites(names []string) ([]Suite, error) {
	if len(names) == 0 {
		return Suites(), nil
	}
	var out []Suite
	for _, n := range names {
		i := slices.IndexFunc(suites, func(s Suite) bool { return s.Name == n })
		if i < 0 {
			return nil, errs.New(errs.Input, "no suite %q (have %s)", n, strings.Join(SuiteNames(), ", "))
		}
		if !slices.ContainsFunc(out, func(s Suite) bool { return s.Name == n }) {
			out = append(out, Suites()[i])
		}
	}
	return out, nil
}

// missing says why the suite cannot be built from the tree at root ("" when it can): suites
// that other work is still adding (property, differential) are simply not there yet.
func (s Suite) missing(root string) string {
	for _, p := range s.Packages {
		pattern := "*_test.go"
		if s.Kind == KindSmoke {
			pattern = "*.go"
		}
		if m, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(p), pattern)); len(m) == 0 {
			return p + " is not in this tree"
		}
	}
	return ""
}

// binName is the file a package's binary is built to inside the work directory.
func binName(pkg string) string {
	return strings.ReplaceAll(pkg, "/", "_") + ".bin"
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// applies reports whether the suite runs against fault f: a judge fault changes no engine
// result and an engine fault no verdict of a judge on a fixed history, so each layer meets
// only its own suites.
func (s Suite) applies(f Fault) bool { return s.Judges == (f.Layer == LayerJudge) }
