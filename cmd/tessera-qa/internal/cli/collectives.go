package cli

import (
	"context"
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/dist/launch"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/tessera-qa/tessera-qa/collectives"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/fabric"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func init() { registerVerb(newCollectivesCmd) }

// collectivesExe is the program a tcp run starts as its ranks: this tessera-qa binary (tests
// that run the CLI in-process point it at a built one).
var collectivesExe = os.Executable

func newCollectivesCmd(e *env) *cobra.Command {
	var (
		ops, redops, dtypes     []string
		counts                  []string
		transport, np, mode, vs string
		minBytes, maxBytes      string
		factor, root            int
		jsonPath, mismatch      string
		topology, clock, algo   string
		o                       collectives.Options
	)
	cmd := &cobra.Command{
		Use:   "collectives [--ops all_reduce,...] [--transport inproc|tcp|shm|cuda|nccl] [--np N] [-b MIN -e MAX -f FACTOR]",
		Short: "Check the engine's collectives as nccl-tests does: #wrong, digests, time, algbw and busbw",
		Long: `For every op x reduction x dtype x count, on a world of --np ranks over --transport in
--mode, call the collective out of place and in place on inputs seeded per (rank, case), count
the elements that differ from the global answer computed in float64 from every rank's inputs
(#wrong: bit-exact for data movement, ints, max and min, and for exact-mode sums against the
correctly rounded value; float sums within the dtype's tolerance scaled by the world size),
digest every rank's output, then time --warmup untimed and --iters timed calls (each after a
barrier; time: the median of the calls' slowest-rank times; algbw = size/time; busbw with
nccl-tests' factors: all_reduce 2(n-1)/n, all_gather, reduce_scatter and all_to_all (n-1)/n,
broadcast 1).

Counts: --counts (default 0, 1 and primes) plus sizes from -b to -e bytes by factor -f. Ops
that give each rank a chunk (all_gather, reduce_scatter, all_to_all) round the count down to a
multiple of the world size, as nccl-tests does; size is the op's whole buffer.

Transports: inproc runs the ranks as goroutines. tcp runs them as processes: without a
launcher this command starts --np copies of itself (engine/dist/launch) and rank 0 gathers every
rank's digests and counts over the communicator; under "tessera-qa launch", torchrun or srun,
or with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set by hand, it joins as that rank (rank
0 prints). shm is launched like tcp, for ranks on one machine: frames move through
shared-memory rings (engine/dist/shm) instead of sockets, with the same wire format. cuda and nccl are the device transports, launched the same way: each rank opens its
local GPU (several ranks may share one; NCCL takes one rank per GPU, so --np 1 on a one-GPU
machine), uploads the same seeded inputs, runs the device communicator out of place and in
place, downloads and checks the results as the host rows do (same #wrong, same digests), and
times each call with CUDA events; each row also carries a device-to-device copy of its bytes
timed on rank 0's GPU in the same run (copy GB/s, busbw over it). Exact mode, --delay,
--mismatch and --vs are host-transport features (E_INPUT with a device transport). Without a
CUDA device (or libnccl for nccl) the command prints one E_NO_DEVICE line and starts no rank.
--compare-host runs the same cases on the inproc host transport in the same command and shows,
per row, whether the bits are the same (a failing row when the mode guarantees bits).

--np takes a list (1,2,3,4,8) to run several worlds; in exact mode the same 24 contributions
split over each world must then give identical bits on every all_reduce row. The table adds
the row's digest (first 12 hex digits) to nccl-tests' columns; --json rows carry op,
transport, mode, world, dtype, redop, bytes, count, time_us, algbw_gbs, busbw_gbs, wrong,
digest and their in-place twins (docs/cli.md). --mode deterministic,exact runs both and prints
exact's time over deterministic's per row. --vs gloo adds torch.distributed's gloo time, busbw
and the ratio ours/gloo per size, measured in the same command the same way (differential/gloo;
what gloo refuses is noted and left blank).

Exit 0 when every row passed, 1 when a row failed (wrong elements, bits that differ between
in place and out of place or between ranks) or a collective failed at run time
(E_TIMEOUT_COMM), 2 for bad input or mismatched calls across ranks (E_INPUT, E_DESYNC), 3 when
the transport, gloo or the rendezvous is missing (E_UNSUPPORTED, E_NO_DEVICE, E_COMM_INIT).`,
		Example: `  tessera-qa collectives
  tessera-qa collectives --ops all_reduce --redops all --dtypes all -b 8 -e 64M -f 4
  tessera-qa collectives --transport tcp --np 4 --json -
  tessera-qa collectives --mode exact --np 1,2,3,4,8 --ops all_reduce --dtypes f32,bf16
  tessera-qa launch --nproc-per-node 3 -- tessera-qa collectives --transport tcp
  tessera-qa collectives --transport cuda --np 4 --compare-host --json cuda4.json`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			var err error
			m := collectives.Matrix{Root: root}
			for _, c := range counts {
				if c = strings.TrimSpace(c); c == "" || c == "none" {
					continue
				}
				v, err := strconv.Atoi(c)
				if err != nil || v < 0 || v > collectives.MaxBytes {
					return usage(cmd, "--counts: %q is not an element count", c)
				}
				m.Counts = append(m.Counts, v)
			}
			if m.Ops, err = collectives.ParseOps(ops); err != nil {
				return err
			}
			if m.RedOps, err = collectives.ParseRedOps(redops); err != nil {
				return err
			}
			if m.DTypes, err = collectives.ParseDTypes(dtypes); err != nil {
				return err
			}
			lo, err := collectives.ParseSize(minBytes)
			if err != nil {
				return usage(cmd, "-b: %s", strings.TrimPrefix(err.Error(), "E_INPUT: "))
			}
			hi, err := collectives.ParseSize(maxBytes)
			if err != nil {
				return usage(cmd, "-e: %s", strings.TrimPrefix(err.Error(), "E_INPUT: "))
			}
			if m.Sizes, err = collectives.Sweep(lo, hi, factor); err != nil {
				return err
			}
			if o.Worlds, err = parseWorlds(np); err != nil {
				return usage(cmd, "--np %q: %s", np, err)
			}
			if root < 0 || (len(o.Worlds) > 0 && root >= minOf(o.Worlds)) {
				return usage(cmd, "--root %d outside the world (--np %s)", root, np)
			}
			for _, md := range strings.Split(mode, ",") {
				m, err := dist.ParseMode(strings.TrimSpace(md))
				if err != nil {
					return err
				}
				if !slices.Contains(o.Modes, m) {
					o.Modes = append(o.Modes, m)
				}
			}
			switch vs {
			case "":
			case "gloo":
				o.VsGloo = true
			default:
				return usage(cmd, "--vs must be gloo, got %q", vs)
			}
			if mismatch != "" {
				if o.Mismatch, err = collectives.ParseMismatch(mismatch); err != nil {
					return err
				}
			}
			if o.Timeout <= 0 || o.Delay < 0 {
				return usage(cmd, "--timeout must be > 0 and --delay >= 0")
			}
			if topology != "" {
				tp, err := fabric.Parse(topology)
				if err != nil {
					return err
				}
				if clock != "virtual" && clock != "real" {
					return usage(cmd, "--clock must be virtual or real, got %q", clock)
				}
				if algo != "auto" && algo != "flat" {
					return usage(cmd, "--algo must be auto or flat, got %q", algo)
				}
				o.Fabric = &collectives.Fabric{Topology: tp, Real: clock == "real", Flat: algo == "flat"}
			}
			o.Matrix, o.Transport = m, transport
			o.Command = "tessera-qa " + strings.Join(childArgs(cmd, false), " ")
			o.Args = childArgs(cmd, true)
			o.Output = e.stderr
			if transport != "inproc" && !launch.InJob() {
				if o.Program, err = collectivesExe(); err != nil {
					return errs.New(errs.Internal, "collectives: cannot find this program to start its ranks: %v", err)
				}
			}
			bars := newCollectivesProgress(e)
			o.Progress = bars.update
			out, err := collectives.Run(context.Background(), o)
			bars.wait()
			if err != nil {
				return &exitError{code: collectivesExit(err), err: err}
			}
			if out.Exit != 0 {
				// The ranks printed their own error lines.
				return &exitError{code: out.Exit}
			}
			if out.Quiet || out.Report == nil {
				return nil
			}
			w := e.human(jsonPath)
			collectives.PrintTable(w, out.Report.Rows)
			collectives.PrintFabric(w, out.Report.Rows)
			collectives.PrintSummary(w, out.Report)
			if err := e.writeJSON(jsonPath, out.Report); err != nil {
				return err
			}
			if !out.Report.Passed {
				return failed()
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringSliceVar(&ops, "ops", nil, "collectives to check: all_reduce, all_gather, reduce_scatter, broadcast, all_to_all or all (default all)")
	f.StringSliceVar(&redops, "redops", nil, "reductions of all_reduce and reduce_scatter: sum, max, min, avg or all (default sum)")
	f.StringSliceVar(&dtypes, "dtypes", nil, "dtypes: f64 f32 bf16 f16 int32 int8 fp8e4m3 fp8e5m2, fp8 or all (default f32)")
	f.StringSliceVar(&counts, "counts", defaultCounts(), "element counts checked besides the size sweep (\"\" or none: none)")
	f.StringVarP(&minBytes, "minbytes", "b", "64", "smallest size of the sweep in bytes (K, M, G suffixes)")
	f.StringVarP(&maxBytes, "maxbytes", "e", "1M", "largest size of the sweep (up to 64M is sensible on a CPU)")
	f.IntVarP(&factor, "stepfactor", "f", 4, "factor between sizes of the sweep")
	f.IntVar(&root, "root", 0, "broadcast's root rank")
	f.StringVar(&transport, "transport", "inproc", "inproc (goroutines), tcp (processes), shm (processes of one machine, shared memory), cuda (processes on GPUs, CUDA IPC) or nccl")
	f.StringVar(&np, "np", "", "world size, or a comma-separated list of them (default 4; under a launcher its WORLD_SIZE)")
	f.StringVar(&mode, "mode", "deterministic", "reduction mode: deterministic, fast or exact; a list runs each and compares their times")
	f.IntVar(&o.Iters, "iters", 20, "timed calls per case and placement (0: check only)")
	f.IntVar(&o.Warmup, "warmup", 5, "untimed calls before the timed ones")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the inputs (fixed by default, so digests compare across runs)")
	f.DurationVar(&o.Timeout, "timeout", dist.DefaultTimeout, "limit for each collective call")
	f.DurationVar(&o.Delay, "delay", 0, "hold every frame a rank sends for a random time up to this, to reorder arrivals")
	f.StringVar(&vs, "vs", "", "also time torch.distributed with gloo on the same world and sizes: gloo")
	f.BoolVar(&o.CompareHost, "compare-host", false, "also run the cases on the inproc host transport and report per row whether the digests are equal")
	f.StringVar(&topology, "topology", "", "run the in-process ranks over a modeled fabric: nodes=GxL, racks=RxGxL, nvl72 or nvl72xR, then ,key=value overrides (docs/distributed.md)")
	f.StringVar(&clock, "clock", "virtual", "with --topology: virtual (a discrete-event clock) or real (frames held for their modeled time)")
	f.StringVar(&algo, "algo", "auto", "with --topology: auto (hierarchical all_reduce when the world spans whole nodes) or flat")
	f.StringVar(&mismatch, "mismatch", "", "testing: RANK:count|dtype|op makes that rank call every case differently (E_DESYNC expected)")
	f.MarkHidden("mismatch")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

// parseWorlds reads --np: a world size or a comma-separated list of them.
func parseWorlds(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > collectives.MaxInprocWorld {
			return nil, fmt.Errorf("want a world size 1..%d or a comma-separated list of them", collectives.MaxInprocWorld)
		}
		out = append(out, n)
	}
	return out, nil
}

func minOf(s []int) int {
	m := s[0]
	for _, v := range s[1:] {
		m = min(m, v)
	}
	return m
}

// childArgs rebuilds the verb's command line from the flags the user set: for the ranks of a
// tcp or device job (rank=true: without --np, --json, --vs and --compare-host, which the
// starting process handles) or for the report.
func childArgs(cmd *cobra.Command, rank bool) []string {
	args := []string{"collectives"}
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if rank && (fl.Name == "np" || fl.Name == "json" || fl.Name == "vs" || fl.Name == "compare-host") {
			return
		}
		v := fl.Value.String()
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			v = strings.Join(sv.GetSlice(), ",")
		}
		args = append(args, "--"+fl.Name+"="+v)
	})
	return args
}

// collectivesExit maps the verb's errors to exit codes: a mismatched call across ranks is bad
// input (2), a transport or oracle not built in and a rendezvous that cannot happen are a
// missing environment (3).
func collectivesExit(err error) int {
	switch errs.CodeOf(err) {
	case errs.Desync:
		return ExitUsage
	case errs.Unsupported, errs.NoDevice, errs.CommInit:
		return ExitMissing
	}
	return exitCode(err)
}

// collectivesProgress draws one bar per world on a terminal (mpb, like run's bars); elsewhere
// it stays silent, so logs and --json - stay clean.
type collectivesProgress struct {
	p    *mpb.Progress
	bars map[int]*mpb.Bar
}

func newCollectivesProgress(e *env) *collectivesProgress {
	if !isTerminal(e.stderr) {
		return &collectivesProgress{}
	}
	return &collectivesProgress{p: mpb.New(mpb.WithOutput(e.stderr), mpb.WithWidth(40), mpb.WithRefreshRate(100*time.Millisecond)),
		bars: map[int]*mpb.Bar{}}
}

func (c *collectivesProgress) update(world, done, total int) {
	if c.p == nil {
		return
	}
	b := c.bars[world]
	if b == nil {
		b = c.p.AddBar(int64(total),
			mpb.PrependDecorators(decor.Name(fmt.Sprintf("world %d", world), decor.WC{W: 10, C: decor.DindentRight}), decor.CountersNoUnit("%d/%d", decor.WCSyncWidth)),
			mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5}), decor.Elapsed(decor.ET_STYLE_GO, decor.WC{W: 6})))
		c.bars[world] = b
	}
	b.SetCurrent(int64(done))
}

func (c *collectivesProgress) wait() {
	if c.p == nil {
		return
	}
	for _, b := range c.bars {
		b.SetTotal(-1, true)
	}
	c.p.Wait()
}

func defaultCounts() []string {
	var out []string
	for _, c := range collectives.DefaultCounts {
		out = append(out, strconv.Itoa(c))
	}
	return out
}
