package cli

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/version"
	"github.com/tessera-qa/tessera-qa/job"
)

// maxListed caps the failing cases listed after the summary; results.json has them all.
const maxListed = 20

// DefaultKeepRuns bounds DIR/runs for someone who reruns in place all day (a run folder is
// about 5 MB: results.json, chaos checkpoints, junit.xml).
const DefaultKeepRuns = 20

func newRunCmd(e *env) *cobra.Command {
	var (
		opts     job.Options
		jsonPath string
		dbPath   string
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "The main job: golden checks, determinism, smoke, collectives, training, chaos, stress and CPU benchmarks",
		Long: `Run the main QA job on the best available backend (cuda if available, else cpu):

  golden       every golden case against the embedded golden files
  determinism  every golden spec run twice in this process; outputs must be bitwise equal
  smoke        --smoke random small graphs drawn from the op registry, checked against the
               golden model (engine/ref); seeded by --seed (random by default, always printed)
  collectives  a short in-process collectives check on 4 ranks (every op on f32, bf16 and
               int32, exact-mode all_reduce): no wrong element, the bits hold; see
               "tessera-qa collectives" for the full one
  training     the reference training workload for a few steps: repeats, data and tensor
               parallel in process, checkpoint and resume (cpu)
  chaos        three in-process fault scenarios (a flipped bit, a duplicated frame, a NaN):
               each detected, recovered from a checkpoint, final bits as the fault-free run's
  stress       a 3 s goroutine soak: every result under load as the same graph alone, no leak
  bench        cpu-backend timings of three kernels and two training steps against the
               golden model in the same process (ratios: the regression gate watches them)

Each run writes into a folder of its own, DIR/runs/TIME-PID/: results.json (harness
results), junit.xml, a replay manifest per failing case under replay/ (replay one with
"tessera-qa replay FILE"), the chaos and stress artifacts, and what was measured (chaos.json,
stress.json, collectives.json, bench.json). DIR/results.json and DIR/junit.xml are copies of
the latest run's. Everything goes into the results store DIR/results.db as one run (--db), so
"tessera-qa dashboard serve" and "tessera-qa gate" show it. Runs in the same DIR never mix;
the oldest run folders beyond --keep are removed after a run (and listed). Exit 0 when every
check passed, 1 when any failed, 3 when --backend names a backend that cannot run here.`,
		Example: `  tessera-qa run
  tessera-qa run --backend cpu --seed 42 --smoke 200
  tessera-qa run --suite smoke --smoke 500 --json -`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("seed") {
				opts.Seed = rand.Uint64N(1_000_000_000)
			}
			if opts.Smoke < 0 {
				return usage(cmd, "--smoke must be >= 0, got %d", opts.Smoke)
			}
			w := e.human(jsonPath)
			fmt.Fprintf(w, "tessera-qa %s (commit %s)\n", version.Version, version.Commit())
			choice, err := job.ChooseBackend(opts.Backend)
			if err != nil {
				return err
			}
			b := choice.Backend
			fmt.Fprintf(w, "backend %s: %s (%s)\n", b.Name(), b.Device(), choice.Reason)
			fmt.Fprintf(w, "smoke seed %d (%d graphs; rerun with --seed %d)\n", opts.Seed, opts.Smoke, opts.Seed)
			if opts.Keep < 0 {
				return usage(cmd, "--keep must be >= 0, got %d", opts.Keep)
			}
			opts.Chosen = &choice
			if self, err := checkExe(); err == nil {
				opts.Self = self
			}
			opts.Command = "tessera-qa " + strings.Join(os.Args[1:], " ")
			prog := newProgress(e.stderr)
			opts.Progress = prog
			rep, err := job.Run(opts)
			prog.Wait()
			if err != nil {
				return err
			}
			ingestRunResults(cmd.Context(), w, e.stderr, dbPath, opts.OutDir, rep)
			printRunSummary(w, rep)
			if err := e.writeJSON(jsonPath, runJSON{Report: rep, Passed: rep.OK(), Version: version.Version}); err != nil {
				return err
			}
			if !rep.OK() {
				return failed()
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&opts.Backend, "backend", "", "backend to run on (default: cuda if available, else cpu); see tessera-qa devices")
	f.Uint64Var(&opts.Seed, "seed", 0, "seed of the smoke generator (default: random, printed)")
	f.IntVar(&opts.Smoke, "smoke", job.DefaultSmoke, "number of random smoke graphs")
	f.StringVar(&opts.OutDir, "out", "tessera-qa-out", "`DIR` for the run folders (runs/TIME-PID/), the latest results.json and junit.xml, and results.db")
	f.IntVar(&opts.Keep, "keep", DefaultKeepRuns, "run folders kept in DIR/runs, this one included; older ones are removed (0: keep all)")
	f.StringSliceVar(&opts.Suites, "suite", nil, "run only these suites: "+strings.Join(job.Suites, ", ")+" (comma-separated)")
	f.IntVar(&opts.Workers, "workers", 0, "cases run concurrently (default: GOMAXPROCS)")
	addJSONFlag(cmd, &jsonPath)
	addRunDBFlag(cmd, &dbPath)
	return cmd
}

// runJSON is the shape of `run --json` (docs/cli.md): the summary; per-case results are in
// results.json.
type runJSON struct {
	Version string `json:"version"`
	Passed  bool   `json:"passed"`
	*job.Report
}

func printRunSummary(w io.Writer, rep *job.Report) {
	fmt.Fprintln(w)
	const row = "%-12s %7v %7v %7v %8v\n"
	fmt.Fprintf(w, row, "SUITE", "PASSED", "FAILED", "ERRORS", "TIME")
	var p, f, x int
	for _, s := range rep.Suites {
		fmt.Fprintf(w, row, s.Suite, s.Passed, s.Failed, s.Errors, seconds(s.Duration))
		p, f, x = p+s.Passed, f+s.Failed, x+s.Errors
	}
	fmt.Fprintf(w, row, "total", p, f, x, seconds(time.Duration(rep.Seconds*float64(time.Second))))
	fmt.Fprintf(w, "\nresults %s\njunit   %s\nrun     %s (this run's artifacts, measurements and copies of both)\n", rep.ResultsPath, rep.JUnitPath, rep.RunDir)
	if len(rep.Pruned) > 0 {
		fmt.Fprintf(w, "removed %d oldest run folders (--keep): %s\n", len(rep.Pruned), strings.Join(rep.Pruned, " "))
	}
	fails := rep.Failures()
	if len(fails) == 0 {
		fmt.Fprintln(w, "PASS")
		return
	}
	fmt.Fprintf(w, "\n%d failing cases (replay manifests in %s):\n", len(fails), rep.ReplayDir)
	for i, r := range fails {
		if i == maxListed {
			fmt.Fprintf(w, "  ... and %d more in %s\n", len(fails)-maxListed, rep.ResultsPath)
			break
		}
		fmt.Fprintf(w, "  %s\n", caseLine(r))
		if r.Replay != "" {
			fmt.Fprintf(w, "    tessera-qa replay %s\n", r.Replay)
		}
	}
	fmt.Fprintln(w, "FAIL")
}
