package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/autotune"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/job"
)

func init() { registerVerb(newTuneCmd) }

// tuneJSON is the shape of `tune --json` (docs/cli.md).
type tuneJSON struct {
	Backend string `json:"backend"`
	Cache   string `json:"cache"` // "" with --no-cache
	autotune.Report
}

// cpuTuneReps is the CPU's default: its wall clock times whole interpreted programs, which
// take long enough that 5 reps give a stable median.
const cpuTuneReps = 5

func newTuneCmd(e *env) *cobra.Command {
	var backendName, cacheDir, jsonPath string
	var noCache bool
	var reps, maxCand int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "tune GRAPH",
		Short: "Autotune the kernel schedules of a graph on a backend and remember them in the autotune cache",
		Long: `Compile GRAPH with default schedules, then for every kernel try the configs of its
config space (tile shapes, pipeline stages), reject those whose outputs differ from the default
schedule's, time the rest and keep the fastest. Choices are stored in the autotune cache keyed
by device (arch, SM count), engine version and kernel key (op, dtypes, shapes); a kernel found
there is not measured again. See docs/autotune.md.

On the CPU the clock is the cpu backend's wall-clock timer over whole-program runs. With
--backend cuda the CUDA backend's event timer is used; without a usable GPU that is exit 3.`,
		Example: `  tessera-qa tune docs/examples/mlp.tg
  tessera-qa tune model.tg --backend cuda --json tune.json
  tessera-qa tune model.tg --cache ./autotune-cache --max-candidates 16`,
		Args: exactArgs("GRAPH"),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if reps < 0 || maxCand < 0 {
				return usage(cmd, "--reps and --max-candidates must be >= 0")
			}
			if backendName == job.RefBackend {
				return usage(cmd, "the golden model has no schedules to tune; pick a backend (see tessera-qa devices)")
			}
			g, err := graph.ParseFile(args[0])
			if err != nil {
				return err
			}
			ch, err := job.ChooseBackend(backendName)
			if err != nil {
				return err
			}
			timer, dev, err := job.TuneClock(ch.Backend)
			if err != nil {
				return err
			}
			tu := &autotune.Tuner{Timer: timer, Runner: ch.Backend, Device: dev, Reps: reps, MaxCandidates: maxCand}
			if reps == 0 && ch.Backend.Name() == "cpu" {
				tu.Reps = cpuTuneReps
			}
			if !noCache {
				if tu.Cache, err = autotune.OpenCache(cacheDir); err != nil {
					return err
				}
				tu.Cache.Warn = e.stderr
			}
			inputs, err := harness.RandomInputs(g, seed, nil)
			if err != nil {
				return err
			}
			_, rep, err := tu.Tune(g, inputs)
			if err != nil {
				return err
			}
			out := tuneJSON{Backend: ch.Backend.Name(), Report: rep}
			if tu.Cache != nil {
				out.Cache = tu.Cache.Dir
			}
			printTune(e.human(jsonPath), ch.Backend, out)
			return e.writeJSON(jsonPath, out)
		}),
	}
	cmd.Flags().StringVar(&backendName, "backend", "cpu", "backend to tune on: cpu, or cuda on a GPU machine")
	cmd.Flags().StringVar(&cacheDir, "cache", "", "autotune cache `DIR` (default: the user cache dir + /tessera-qa/autotune)")
	cmd.Flags().BoolVar(&noCache, "no-cache", false, "neither read nor write the autotune cache")
	cmd.Flags().IntVar(&reps, "reps", 0, "timed runs per candidate (0: 5 on cpu, 20 on a GPU)")
	cmd.Flags().IntVar(&maxCand, "max-candidates", 0, "try at most `N` configs per kernel, nearest to the default first (0: all)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the random inputs")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

func printTune(w io.Writer, b backend.Backend, r tuneJSON) {
	cache := r.Cache
	if cache == "" {
		cache = "off"
	}
	fmt.Fprintf(w, "tune %s on %s (%s): %s, %d reps, engine %s, cache %s\n", r.Graph, r.Backend, b.Device(), r.Clock, r.Reps, r.Engine, cache)
	for _, k := range r.Kernels {
		fmt.Fprintf(w, "  %s %s ", k.Kernels[0], k.Kind)
		switch {
		case k.Skipped != "":
			fmt.Fprintf(w, "%s kept: %s", k.Default, k.Skipped)
		case k.CacheHit && k.DefaultMs == 0:
			fmt.Fprintf(w, "cache hit %s (not timed: nothing to choose from)", k.Chosen)
		case k.CacheHit:
			fmt.Fprintf(w, "cache hit %s (tuned earlier: %.4g ms -> %.4g ms)", k.Chosen, k.DefaultMs, k.BestMs)
		case k.Measured == 0:
			fmt.Fprintf(w, "%s kept, not timed", k.Default)
		default:
			fmt.Fprintf(w, "%s %.4g ms -> %s %.4g ms (%.2fx), %d of %d configs timed, %d rejected",
				k.Default, k.DefaultMs, k.Chosen, k.BestMs, k.DefaultMs/max(k.BestMs, 1e-12), k.Measured, k.Candidates, len(k.Rejected))
		}
		fmt.Fprintf(w, "  key=%s\n", k.Key)
		if k.Note != "" {
			fmt.Fprintf(w, "    note: %s\n", k.Note)
		}
	}
	fmt.Fprintf(w, "schedule-hash %s -> %s\n", r.DefaultScheduleHash, r.ScheduleHash)
}
