package cli

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/job"
	"github.com/tessera-qa/tessera-qa/stress"
)

func init() { registerVerb(newStressCmd) }

func newStressCmd(e *env) *cobra.Command {
	var (
		jobs                             int
		mode, device, out, jsonPath      string
		worker, plant, workload          string
		pressure, cpuBudget, metricsAddr string
		cacheCorrupt, spread, profiled   bool
		duration, interval               time.Duration
		seed                             uint64
		perJob                           int
	)
	cmd := &cobra.Command{
		Use:   "stress --jobs N --mode goroutines|processes|streams [--device cpu|cuda] --duration D [--workload graphs|train] [--pressure oom|cache] [--json FILE]",
		Short: "Run N concurrent jobs of random graphs, compare every result with its alone run, watch for leaks",
		Long: `Each job cycles through its own pool of seeded random graphs (property's generator). Before
the soak every graph runs alone, one at a time, and its digest and latency are recorded (the
plan); under load each result must give the same bits: a difference is E_NONDETERMINISTIC and
leaves a replay manifest. Jobs are goroutines of this process (--mode goroutines) or processes
of this binary (--mode processes), or goroutines each on a CUDA stream, thread and
allocator of its own on the one GPU, so their kernels overlap (--mode streams, --device cuda).
A process placed on an SM partition (TESSERA_CUDA_SMS=N) runs every job there. Leak monitors sample RSS, goroutines, open fds, files under
the run's temp folder and, with --device cuda, device memory and the caching allocator's live
bytes, before, during and after the soak: a monitor leaks when the floor of its samples rises
in every quarter of the soak and by more than its allowance (package stress, Allowances).
Progress goes to stderr once a second; then a table: graphs, mismatches, leaks per monitor with
the slope, p50/p99 latency per job alone and under load. The plan, the history and any replay
manifests are under --out.

--pressure oom adds a memory hog beside the jobs: round after round it takes the backend's
memory through the engine until the engine refuses with E_OOM (device memory on a GPU; on the
CPU the CPU backend's budget, --cpu-budget, which the jobs share only in goroutines mode), runs
a graph while holding it, lets go and runs the graph again: a round that ends in a coded E_OOM
and then gives the graph's alone digest is an OOM recovery. A job's graph refused with E_OOM
while the hog holds the memory is counted, not failed, but the job must pass a graph after it.
--pressure cache (with --mode processes) adds N processes hammering one autotune cache under
--out, and corrupts its file halfway (unless --cache-corrupt=false): every entry must be found
as stored, the corruption detected (E_CACHE_CORRUPT) and kept aside, nothing stored after it
lost; with --device cuda the jobs also share one fresh CUDA_CACHE_PATH (the driver's JIT cache).

Exit 0 when there is no mismatch, error or leak and the pressure checks pass; 1 when not; 2 for bad usage; 3 when
--device cuda has no GPU.`,
		Example: `  tessera-qa stress --jobs 4 --mode processes --duration 60s --json -
  tessera-qa stress --jobs 8 --mode processes --device cuda --duration 10m --json stress.json
  tessera-qa stress --jobs 3 --mode goroutines --duration 30s --pressure oom
  tessera-qa stress --jobs 4 --mode processes --duration 30s --pressure cache`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if worker != "" {
				ch, err := job.ChooseBackend(device)
				if err != nil {
					return err
				}
				return stress.Worker(context.Background(), worker, ch.Backend, e.stdout)
			}
			if jobs < 1 {
				return usage(cmd, "--jobs %d: need at least 1", jobs)
			}
			if mode != stress.ModeGoroutines && mode != stress.ModeProcesses && mode != stress.ModeStreams {
				return usage(cmd, "--mode %q: want goroutines, processes or streams", mode)
			}
			if device != "cpu" && device != "cuda" {
				return usage(cmd, "--device %q: want cpu or cuda", device)
			}
			if mode == stress.ModeStreams && device != "cuda" {
				return usage(cmd, "--mode streams runs jobs on CUDA streams: it needs --device cuda")
			}
			if duration <= 0 {
				return usage(cmd, "--duration %s: need more than 0", duration)
			}
			if spread && (mode != stress.ModeProcesses || device != "cuda") {
				return usage(cmd, "--spread places job processes on GPUs: it needs --mode processes --device cuda")
			}
			if workload != stress.WorkloadGraphs && workload != stress.WorkloadTrain {
				return usage(cmd, "--workload %q: want graphs or train", workload)
			}
			if workload == stress.WorkloadTrain && pressure != "" {
				return usage(cmd, "--workload train runs without --pressure")
			}
			if plant != "" && plant != stress.PlantLeak {
				return usage(cmd, "--plant %q: want %s", plant, stress.PlantLeak)
			}
			if pressure != "" && pressure != stress.PressureOOM && pressure != stress.PressureCache {
				return usage(cmd, "--pressure %q: want %s or %s", pressure, stress.PressureOOM, stress.PressureCache)
			}
			if pressure == stress.PressureCache && mode != stress.ModeProcesses {
				return usage(cmd, "--pressure cache needs --mode processes (the cache's lock is between processes)")
			}
			budget, err := cpu.ParseBytes(cpuBudget)
			if err != nil || budget < 1<<20 {
				return usage(cmd, "--cpu-budget %q: want a size of at least 1MiB (N, NKiB, NMiB, NGiB)", cpuBudget)
			}
			ch, err := job.ChooseBackend(device)
			if err != nil {
				return err
			}
			exe, err := collectivesExe()
			if err != nil {
				return errs.New(errs.Internal, "stress: cannot find this program to start its jobs: %v", err)
			}
			if out == "" {
				out = filepath.Join("tessera-qa-out", "stress", runFolderName())
			} else {
				out = freshArtifacts(e.stderr, "stress", out, "history.jsonl", "plan.json")
			}
			devices := 0
			if spread {
				devs, err := cuda.Devices()
				if err != nil {
					return err
				}
				devices = len(devs)
				fmt.Fprintf(e.stderr, "stress: jobs spread over %d GPU(s): job j on GPU j mod %d\n", devices, devices)
			}
			m, stopMetrics, err := e.startMetrics(metricsAddr, "stress")
			if err != nil {
				return err
			}
			defer stopMetrics()
			fmt.Fprintf(e.stderr, "stress: %d jobs (%s) on %s for %s; alone runs first; artifacts %s\n", jobs, mode, ch.Backend.Device(), duration, out)
			rep, err := stress.Run(context.Background(), stress.Options{
				Mode: mode, Jobs: jobs, Backend: ch.Backend, Duration: duration, Seed: seed, PerJob: perJob,
				Interval: interval, OutDir: out, Progress: e.stderr, Plant: plant, Workload: workload,
				Pressure: pressure, CPUBudget: budget, NoCorrupt: !cacheCorrupt, Devices: devices, Observe: observeStress(m), Profile: profiled,
				Command: func(ctx context.Context, a string) *exec.Cmd {
					args := []string{"stress", "--device", device, "--worker", a}
					return exec.CommandContext(ctx, exe, args...)
				},
			})
			if err != nil {
				return err
			}
			printStress(e.human(jsonPath), rep)
			if rep.Trace != "" {
				fmt.Fprintf(e.human(jsonPath), "profile: trace %s (%d slices; the first %d graph runs of every job)\n", rep.Trace, rep.Slices, stress.ProfiledRuns)
			}
			if err := e.writeJSON(jsonPath, rep); err != nil {
				return err
			}
			if !rep.Pass {
				return &exitError{code: ExitFailed}
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.IntVar(&jobs, "jobs", 4, "concurrent jobs")
	f.StringVar(&mode, "mode", stress.ModeGoroutines, "jobs as goroutines, processes or streams (CUDA lanes of one process)")
	f.StringVar(&device, "device", "cpu", "backend the jobs run on: cpu or cuda")
	f.BoolVar(&spread, "spread", false, "with --mode processes --device cuda: job j on GPU j mod (visible GPUs), every result still checked against the alone runs")
	f.DurationVar(&duration, "duration", 30*time.Second, "length of the loaded phase (the soak)")
	f.DurationVar(&interval, "interval", 250*time.Millisecond, "time between monitor samples")
	f.Uint64Var(&seed, "seed", 1, "seed of the graph pools")
	f.IntVar(&perJob, "graphs-per-job", 6, "graphs in each job's pool")
	f.StringVar(&out, "out", "", "artifacts folder (default tessera-qa-out/stress/TIME-PID)")
	f.StringVar(&pressure, "pressure", "", "a pressure mode beside the jobs: oom (a memory hog) or cache (processes hammering one autotune cache)")
	f.StringVar(&cpuBudget, "cpu-budget", "32MiB", "the cpu backend's memory budget under --pressure oom")
	f.BoolVar(&cacheCorrupt, "cache-corrupt", true, "under --pressure cache, corrupt the cache file halfway")
	addJSONFlag(cmd, &jsonPath)
	addMetricsFlag(cmd, &metricsAddr)
	f.StringVar(&worker, "worker", "", "internal: run one job of a plan (JSON arguments)")
	f.MarkHidden("worker")
	f.StringVar(&workload, "workload", stress.WorkloadGraphs, "what each job runs: graphs (random graphs) or train (short training runs of the mlp)")
	f.BoolVar(&profiled, "profile", false, "record the kernels of every job's first graph runs into the artifacts' profile/ and merge them into one Perfetto trace (a process per job)")
	f.StringVar(&plant, "plant", "", "internal: plant a fault in every job (leak-per-graph)")
	f.MarkHidden("plant")
	return cmd
}

func printStress(w io.Writer, r *stress.Report) {
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "stress %s: %d jobs (%s) on %s, %.1fs: %d graphs (%.0f/s), mismatches %d, errors %d, leaks %d",
		verdict, r.Jobs, r.Mode, r.Device, r.DurationS, r.Graphs, r.GraphsPerSec, r.Mismatches, r.Errors, r.LeakCount)
	if r.OOM != nil {
		fmt.Fprintf(w, ", OOM recoveries %d", r.OOM.Recoveries)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tGRAPHS\tALONE p50 ms\tALONE p99 ms\tLOADED p50 ms\tLOADED p99 ms")
	for _, l := range r.Latency {
		fmt.Fprintf(tw, "%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f\n", l.Job, l.Graphs, l.AloneP50, l.AloneP99, l.LoadedP50, l.LoadedP99)
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MONITOR\tSOURCE\tSAMPLES\tBEFORE\tAFTER\tGROWTH\tALLOWANCE\tSLOPE/min\tLEAK")
	for _, m := range r.Monitors {
		leak := "no"
		if m.Leak {
			leak = "LEAK"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f\t%s\n", m.Monitor, m.Source, m.Samples, m.Before, m.After, m.Growth, m.Allowance, m.Slope, leak)
	}
	tw.Flush()
	printPressure(w, r)
	for _, f := range r.Failures {
		fmt.Fprintln(w, "  "+f)
	}
}

// printPressure prints the pressure rows: the hog's rounds, or the hammered cache.
func printPressure(w io.Writer, r *stress.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	if o := r.OOM; o != nil {
		fmt.Fprintln(tw, "PRESSURE\tROUNDS\tOOM RECOVERIES\tHOG E_OOM UNDER PRESSURE\tNEIGHBOUR E_OOM\tHELD MAX MiB")
		fmt.Fprintf(tw, "oom\t%d\t%d\t%d\t%d\t%.1f\n", o.Rounds, o.Recoveries, o.UnderOOM, o.NeighbourOOMs, float64(o.HeldMaxBytes)/(1<<20))
		tw.Flush()
		fmt.Fprintln(w, "  "+o.Note)
	}
	if c := r.Cache; c != nil {
		fmt.Fprintln(tw, "PRESSURE\tHAMMERS\tSTORES\tLOOKUPS\tENTRIES\tLOST\tWRONG\tOP ERRORS\tCORRUPTED\tDETECTED\tKEPT ASIDE\tFINAL VERIFIES")
		fmt.Fprintf(tw, "cache\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%v\n", c.Hammers, c.Stores, c.Lookups, c.Entries, c.Lost, c.Wrong, c.OpErrors, len(c.Injected), c.Detected, c.KeptAside, c.FinalOK)
		tw.Flush()
		for _, in := range c.Injected {
			fmt.Fprintln(w, "  corrupted: "+in)
		}
		fmt.Fprintln(w, "  guarantee: "+c.Guarantee)
		fmt.Fprintln(w, "  jit cache: "+c.JIT)
	}
}

// chooseCUDA is the CUDA backend's device when it can run here (tests use it to know whether
// exit 3 can be shown).
func chooseCUDA() (string, error) {
	ch, err := job.ChooseBackend("cuda")
	if err != nil {
		return "", err
	}
	return ch.Backend.Device(), nil
}
