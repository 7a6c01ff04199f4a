package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/dist/launch"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/chaos"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func init() { registerVerb(newChaosCmd) }

func newChaosCmd(e *env) *cobra.Command {
	var (
		base                          chaos.Scenario
		killRank, hangRank, atStep    int
		hangFor, commTimeout, bound   time.Duration
		partition, faults, schedule   string
		count                         int
		seed                          uint64
		artifacts, jsonPath, scenFile string
		regressions, list             bool
		preflightLevel                int
		metricsAddr                   string
	)
	cmd := &cobra.Command{
		Use:   "chaos [--kill-rank R [--at-step S] | --hang-rank R [--for D] | --partition R1,R2 | --faults NAME[@RANK:STEP],... | --schedule random --count N --seed S | --regressions]",
		Short: "Inject faults into a data-parallel training job, recover it, and check the history",
		Long: `Run the reference training workload (--workload train:mlp, train:transformer-block or train:fno) on
--world ranks, inject faults at given steps, let the launcher restart the group (torchelastic
semantics: --max-restarts) so every rank resumes from the newest committed checkpoint, and check
the run's history afterwards (package chaos): every step any rank applied carries the fault-free
run's loss bits and the final parameters are bit-identical to it, the job finished within its
bound, no committed step was lost or applied twice, every fault was detected with its code
(E_TIMEOUT_COMM naming the silent rank, E_DESYNC, E_NAN_INF, E_CHECKPOINT ...) or is one the job
tolerates. Prints a table per run (fault, rank, step, detected by, time-to-detect,
time-to-recover, lost steps, bits identical) and a verdict; the history, the scenario, the
reference and the report are in --artifacts.

Faults (chaos.Catalogue, hierarchical names): rank/kill rank/hang rank/slow net/partition
net/drop net/corrupt net/duplicate net/delay device/nan device/illegal-address device/oom
checkpoint/corrupt checkpoint/torn-write disk/full rdzv/store-restart node/kill node/pause
node/disconnect fabric/flap fabric/slow-link fabric/congest fabric/corrupt-nic. --faults takes
NAME, NAME@RANK:STEP or either with ?KEY=VALUE&... parameters (fabric/slow-link@3:12?peer=11&factor=20,
fabric/congest@8:12?node=1); with --schedule random it takes the kinds to draw from, FAMILY/* for a
family (fabric/*). --list prints which act here.

--topology nodes=8x8 (with --world 64) makes the goroutine ranks train over the modeled fabric
(engine/dist/fabric) in virtual time: the real frames pay their links' modeled latency and
bandwidth on a discrete-event clock, which costs no wall time. The fabric/* faults act on it: a
flapping link, a slow link and a congested switch must be named by the straggler watch from the
ranks' per-peer waits (E_STRAGGLER: the ranks on the slow path, with time-to-detect), a NIC that
corrupts one frame in N by the receiver's CRC (E_DESYNC) and a restart from the checkpoint.

Locally the ranks are processes started by this command (--transport tcp) or goroutines
(--transport inproc: only the net/* and device/nan faults). Under torchrun or srun (RANK or
SLURM_PROCID set) every task is one node's agent: it runs its rank, the designated rank injects
its fault, agent 0 serves the store and checks the run; --artifacts must then be shared.

Exit 0 only when every run passes the checker; 1 when one fails; 2 for bad usage; 3 when a fault
asked for explicitly cannot act here (device faults without a GPU, disk/full without root).`,
		Example: `  tessera-qa chaos --kill-rank 1 --world 3 --workload train:mlp --json -
  tessera-qa chaos --schedule random --count 10 --seed 1 --world 3
  tessera-qa chaos --hang-rank 2 --for 10s --world 4
  tessera-qa chaos --faults net/corrupt@1:12,checkpoint/torn-write@0:30 --world 3
  tessera-qa chaos --world 64 --topology nodes=8x8 --faults fabric/slow-link@3:10?peer=11,fabric/corrupt-nic@20:30
  tessera-qa chaos --world 64 --topology nodes=8x8 --schedule random --count 20 --faults 'fabric/*'
  srun --ntasks=4 tessera-qa chaos --kill-rank 1 --artifacts /shared/chaos --json out/chaos.json`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			if chaos.IsWorker() {
				return chaos.RunRank(ctx, e.stdout)
			}
			if err := e.preflight(cmd, preflightLevel); err != nil {
				return err
			}
			if list {
				sc := base
				if sc.Topology != "" && !cmd.Flags().Changed("transport") {
					sc.Transport = "inproc"
				}
				if err := sc.Normalize(); err != nil {
					return usage(cmd, "%v", err)
				}
				r := sc.Run(os.Geteuid() == 0)
				for _, f := range chaos.Catalogue() {
					why := "available"
					if err := f.Available(r); err != nil {
						why = err.Error()
					}
					fmt.Fprintf(e.stdout, "%-24s %s\n", f.Name(), why)
				}
				return nil
			}
			base.CommTimeout, base.Bound = chaos.Duration(commTimeout), chaos.Duration(bound)
			if !cmd.Flags().Changed("comm-timeout") {
				base.CommTimeout = 0 // the scenario's world picks it (chaos.CommTimeoutFor)
			}
			if base.Topology != "" && !cmd.Flags().Changed("transport") {
				base.Transport = "inproc" // the modeled fabric joins goroutine ranks
			}
			if base.Mesh != "" && !cmd.Flags().Changed("world") {
				base.World = 0 // the mesh's ranks
			}
			var cluster *rdzv.Env
			if launch.InJob() {
				env, err := rdzv.FromOS()
				if err != nil {
					return err
				}
				cluster = &env
				// The job's world is the world: one rank per task.
				if cmd.Flags().Changed("world") && base.World != env.World {
					return usage(cmd, "--world %d, but this job has %d tasks (one rank per task)", base.World, env.World)
				}
				base.World = env.World
			}
			specs, explicit, err := chaosScenarios(cmd, base, killRank, atStep, hangRank, hangFor, partition, faults, schedule, count, seed, scenFile, regressions)
			if err != nil {
				return err
			}
			root := os.Geteuid() == 0 && cluster == nil
			if explicit {
				for _, sc := range specs {
					if un := sc.Unavailable(sc.Run(root)); len(un) > 0 {
						return &exitError{code: ExitMissing, err: errs.New(errs.Unsupported, "chaos: %s", strings.Join(un, "; "))}
					}
				}
			}
			exe, err := collectivesExe()
			if err != nil {
				return errs.New(errs.Internal, "chaos: cannot find this program to start its ranks: %v", err)
			}
			switch {
			case artifacts == "" && cluster != nil:
				artifacts = filepath.Join("tessera-qa-out", "chaos", cluster.JobID)
			case artifacts == "":
				artifacts = filepath.Join("tessera-qa-out", "chaos", runFolderName())
			case cluster == nil:
				// Agents of a cluster job share --artifacts and must agree on it: only a
				// single-node run moves aside from an earlier run.
				artifacts = freshArtifacts(e.stderr, "chaos", artifacts, "*/history-agent-*.jsonl")
			}
			m, stopMetrics, err := e.startMetrics(metricsAddr, "chaos")
			if err != nil {
				return err
			}
			defer stopMetrics()
			w := e.human(jsonPath)
			host, _ := os.Hostname()
			res := chaos.Document{Schema: chaos.DocumentSchema, Kind: chaos.DocumentKind, Started: time.Now().UTC(), Machine: host,
				Command: "tessera-qa " + strings.Join(os.Args[1:], " "), Passed: true, BitsIdentical: true, Specs: specs}
			for i, sc := range specs {
				dir := filepath.Join(artifacts, fmt.Sprintf("%03d-%s", i, strings.NewReplacer("/", "-", "+", "-").Replace(sc.Name)))
				o := chaos.Options{Dir: dir, Program: exe, Args: []string{"chaos"}, Log: e.stderr, Cluster: cluster}
				rep, err := chaos.Execute(ctx, sc, o)
				if err != nil {
					return err
				}
				if rep == nil {
					continue // an agent of a cluster run other than 0: agent 0 reports
				}
				fmt.Fprint(w, rep.Table())
				fmt.Fprintf(w, "artifacts: %s\n\n", dir)
				res.Scenarios = append(res.Scenarios, rep)
				observeChaos(m, rep)
				res.Passed = res.Passed && rep.Passed
				res.BitsIdentical = res.BitsIdentical && rep.BitsIdentical
			}
			if len(res.Scenarios) == 0 {
				return nil
			}
			res.Summary = chaos.Summarize(res.Scenarios, 5)
			if len(res.Scenarios) > 1 {
				fmt.Fprint(w, res.Summary.String())
			}
			if err := e.writeJSON(jsonPath, res); err != nil {
				return err
			}
			if !res.Passed {
				return failed()
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.IntVar(&killRank, "kill-rank", -1, "SIGKILL rank `R` right after --at-step")
	f.IntVar(&atStep, "at-step", 0, "the step after which --kill-rank/--hang-rank/--partition act (default: halfway, between checkpoints)")
	f.IntVar(&hangRank, "hang-rank", -1, "SIGSTOP rank `R` at --at-step for --for, then SIGCONT")
	f.DurationVar(&hangFor, "for", 0, "how long --hang-rank or --partition last (0: until the group restarts)")
	f.StringVar(&partition, "partition", "", "cut ranks `R1,R2,...` off from the others at --at-step")
	f.StringVar(&faults, "faults", "", "faults `NAME[@RANK:STEP],...` (with --schedule random: the kinds to draw from)")
	f.StringVar(&schedule, "schedule", "", "random: --count seeded random fault schedules")
	f.IntVar(&count, "count", 10, "runs of --schedule random")
	f.Uint64Var(&seed, "seed", 1, "first schedule seed of --schedule random (run i has seed+i)")
	f.BoolVar(&regressions, "regressions", false, "run the named regression scenarios")
	f.StringVar(&scenFile, "scenario", "", "run the scenario in `FILE` (JSON, as written to the artifacts)")
	f.BoolVar(&list, "list", false, "list the fault kinds and whether each can act in this run")
	f.IntVar(&base.World, "world", 3, "ranks")
	f.StringVar(&base.Mesh, "mesh", "", "train the workload on this mesh (dp=N,tp=M tensor-, dp=N,pp=P pipeline- or dp=N,ep=M expert-parallel); the world is its ranks")
	f.StringVar(&base.Transport, "transport", "tcp", "tcp (process ranks) or inproc (goroutine ranks; the default with --topology)")
	f.StringVar(&base.Topology, "topology", "", "train over a modeled fabric of this topology in virtual time (nodes=GxL, racks=RxGxL, nvl72; goroutine ranks): the fabric/* faults act on it")
	f.StringVar(&base.Workload, "workload", "train:mlp", "train:mlp, train:transformer-block, train:fno or train:moe (with --mesh dp=N,ep=M)")
	f.StringVar(&base.Backend, "backend", "cpu", "the workload's backend: cpu or cuda")
	f.IntVar(&base.Steps, "steps", chaos.DefaultSteps, "training steps")
	f.IntVar(&base.CheckpointEvery, "checkpoint-every", chaos.DefaultCheckEvery, "commit a checkpoint every K steps")
	f.Uint64Var(&base.Seed, "train-seed", 1, "the workload's seed (parameters and data)")
	f.IntVar(&base.MaxRestarts, "max-restarts", 0, "restarts the launcher may make (0: 2 more than the faults need)")
	f.DurationVar(&commTimeout, "comm-timeout", chaos.DefaultCommTimeout, "bound on every collective: a rank silent longer is detected (default: 3s per 8 ranks of the world)")
	f.DurationVar(&bound, "bound", chaos.DefaultBound, "bound on each whole run: past it the run hung")
	f.StringVar(&artifacts, "artifacts", "", "`DIR` for the runs' histories and reports (default tessera-qa-out/chaos/TIME)")
	f.BoolVar(&base.Profile, "profile", false, "record every rank's kernels and collectives; per attempt a Perfetto trace and the per-rank summary with the straggler ranking in the artifacts (profile/attempt-N/)")
	f.StringVar(&base.Plant, "plant", "", "testing: plant a known bug (accept-bad-checksum) to see the checker catch it")
	f.MarkHidden("plant")
	addJSONFlag(cmd, &jsonPath)
	addPreflightFlag(cmd, &preflightLevel)
	addMetricsFlag(cmd, &metricsAddr)
	return cmd
}

// chaosScenarios turns the flags into scenarios; explicit is true when the user named the
// faults (then one that cannot act here is exit 3, not a skipped row).
func chaosScenarios(cmd *cobra.Command, base chaos.Scenario, killRank, atStep, hangRank int, hangFor time.Duration,
	partition, faults, schedule string, count int, seed uint64, scenFile string, regressions bool) ([]*chaos.Scenario, bool, error) {
	modes := 0
	for _, on := range []bool{killRank >= 0, hangRank >= 0, partition != "", faults != "" && schedule == "", schedule != "", scenFile != "", regressions} {
		if on {
			modes++
		}
	}
	if modes > 1 {
		return nil, false, usage(cmd, "choose one of --kill-rank, --hang-rank, --partition, --faults, --schedule random, --scenario or --regressions")
	}
	if modes == 0 {
		return nil, false, usage(cmd, "nothing to inject: give --kill-rank R, --hang-rank R, --partition R1,R2, --faults NAMES, --schedule random, --scenario FILE or --regressions")
	}
	norm := base
	if err := norm.Normalize(); err != nil {
		return nil, false, usage(cmd, "%v", err)
	}
	if atStep == 0 {
		atStep = norm.Steps/2 + norm.CheckpointEvery/2
	}
	switch {
	case scenFile != "":
		sc, err := chaos.LoadScenario(scenFile)
		if err != nil {
			return nil, false, err
		}
		return []*chaos.Scenario{sc}, true, nil
	case regressions:
		var out []*chaos.Scenario
		for _, sc := range chaos.Regressions(norm.World) {
			s := *sc
			s.Workload, s.Transport, s.Backend, s.CommTimeout, s.Bound = base.Workload, base.Transport, base.Backend, base.CommTimeout, base.Bound
			if err := s.Normalize(); err != nil {
				return nil, false, err
			}
			out = append(out, &s)
		}
		return out, false, nil
	case schedule != "":
		if schedule != "random" {
			return nil, false, usage(cmd, "--schedule %q: want random", schedule)
		}
		if count < 1 {
			return nil, false, usage(cmd, "--count %d: want at least 1", count)
		}
		var only []string
		if faults != "" {
			for _, n := range strings.Split(faults, ",") {
				if prefix, ok := strings.CutSuffix(n, "/*"); ok { // a family: fabric/*
					before := len(only)
					for _, k := range chaos.Names() {
						if strings.HasPrefix(k, prefix+"/") {
							only = append(only, k)
						}
					}
					if len(only) == before {
						return nil, false, usage(cmd, "--faults %s: no fault kind is named %s/...", n, prefix)
					}
					continue
				}
				if _, err := chaos.NewFault(n); err != nil {
					return nil, false, usage(cmd, "%v", err)
				}
				only = append(only, n)
			}
		}
		var out []*chaos.Scenario
		for i := range count {
			sc, err := chaos.RandomScenario(base, seed+uint64(i), norm.Run(os.Geteuid() == 0 && !launch.InJob()), only)
			if err != nil {
				return nil, false, err
			}
			out = append(out, sc)
		}
		return out, false, nil
	}
	sc := base
	at := func(f chaos.Fault, rank int) chaos.Injection {
		return chaos.Injection{Fault: f, Rank: rank, Step: atStep}
	}
	switch {
	case killRank >= 0:
		sc.Faults = []chaos.Injection{at(&chaos.Kill{}, killRank)}
	case hangRank >= 0:
		sc.Faults = []chaos.Injection{at(&chaos.Hang{For: chaos.Duration(hangFor)}, hangRank)}
	case partition != "":
		var side []int
		for _, s := range strings.Split(partition, ",") {
			r, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return nil, false, usage(cmd, "--partition %q: want ranks R1,R2,...", partition)
			}
			side = append(side, r)
		}
		if len(side) == 0 || side[0] < 0 || side[0] >= norm.World {
			return nil, false, usage(cmd, "--partition %q: ranks of world %d", partition, norm.World)
		}
		sc.Faults = []chaos.Injection{at(&chaos.Partition{Side: side, For: chaos.Duration(hangFor)}, side[0])}
	default:
		parts := strings.Split(faults, ",")
		for i, p := range parts {
			p, query, _ := strings.Cut(strings.TrimSpace(p), "?")
			name, where, hasWhere := strings.Cut(p, "@")
			f, err := chaos.NewFault(name)
			if err != nil {
				return nil, false, usage(cmd, "%v", err)
			}
			if query != "" {
				if err := faultParams(f, query); err != nil {
					return nil, false, usage(cmd, "--faults %q: %v", p, err)
				}
			}
			in := chaos.Injection{Fault: f, Rank: (i + 1) % norm.World, Step: (i + 1) * norm.Steps / (len(parts) + 1)}
			if hasWhere {
				r, s, ok := strings.Cut(where, ":")
				var e1, e2 error
				in.Rank, e1 = strconv.Atoi(r)
				if ok {
					in.Step, e2 = strconv.Atoi(s)
				}
				if e1 != nil || e2 != nil {
					return nil, false, usage(cmd, "--faults %q: want NAME or NAME@RANK:STEP", p)
				}
			}
			sc.Faults = append(sc.Faults, in)
		}
	}
	if err := sc.Normalize(); err != nil {
		return nil, false, usage(cmd, "%v", err)
	}
	return []*chaos.Scenario{&sc}, true, nil
}

// faultParams sets a fault's parameters from KEY=VALUE&... (its JSON fields: numbers as
// numbers, anything else as a string, so durations read "150us").
func faultParams(f chaos.Fault, query string) error {
	m := map[string]any{}
	for _, kv := range strings.Split(query, "&") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("parameter %q: want KEY=VALUE", kv)
		}
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			m[k] = n
		} else {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(f); err != nil {
		return fmt.Errorf("parameters of %s: %v", f.Name(), err)
	}
	return nil
}
