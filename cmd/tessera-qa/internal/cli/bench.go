package cli

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tessera-qa/tessera-qa/bench"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func init() { registerVerb(newBenchCmd) }

// benchSides returns the engine and the oracle a bench compares; tests replace it with a
// fixed clock and the golden model.
var benchSides = func(python string, timeout time.Duration) (bench.Engine, bench.Oracle, error) {
	b, err := backend.Get("cuda")
	if err != nil {
		return nil, nil, err
	}
	cb, ok := b.(*cuda.Backend)
	if !ok {
		return nil, nil, errs.New(errs.Internal, "bench: the cuda backend is a %T", b)
	}
	eng := bench.CUDA{B: cb}
	// The GPU first: it is checked in milliseconds, torch takes seconds to import.
	if _, err := eng.Device(); err != nil {
		return nil, nil, err
	}
	o, err := bench.StartTorch(python, timeout)
	if err != nil {
		return nil, nil, err
	}
	return eng, o, nil
}

func newBenchCmd(e *env) *cobra.Command {
	var vs, python, jsonPath string
	var ops, shapes, dtypes []string
	var reps, warmup, refRows int
	var seed uint64
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "bench --vs torch",
		Short: "Time the engine against PyTorch on the same GPU, op by op, after checking both agree",
		Long: `For every selected case (op x shape x dtype), on the CUDA backend and in PyTorch on the
same GPU, in this one command: draw fresh random inputs (never zeros); check correctness first
(the engine's whole output against torch's under the op's tolerance, and its first rows against
the float64 golden model engine/ref); then time both sides the same way: warm-up runs, then
--reps runs each timed with CUDA events, the L2 cache flushed (twice its size written) before
every run; the median is reported. A case that fails its checks is not timed.

Ops (shape dims, default shapes and dtypes):
` + bench.Describe() + `
--shapes AxB applies to every selected op whose shape has that many dims; op:AxB to one op.
The table's SPEEDUP is torch ms / engine ms (above 1 the engine is faster); --json writes the
bench JSON that "tessera-qa report ingest" reads (its ratio is engine ms / torch ms).
torch runs in one python process (torch_bench.py, embedded) under --python, $TESSERA_QA_PYTHON,
python3 on PATH or /usr/bin/python3, the first that imports torch and sees a GPU.

Exit 0 when every case passed and was timed, 1 when any failed or errored, 2 on bad usage,
3 when there is no GPU (E_NO_DEVICE) or no torch with CUDA.`,
		Example: `  tessera-qa bench --vs torch
  tessera-qa bench --vs torch --ops softmax,layernorm,copy --dtypes f32,bf16 --json bench.json
  tessera-qa bench --vs torch --ops matmul --shapes 4096x4096x4096 --reps 50
  tessera-qa bench --vs torch --ops copy,fft_c2c,fft_r2c,conv2d`,
		Args: cobra.NoArgs,
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if vs != "torch" {
				return usage(cmd, "--vs must be torch (the only reference so far), got %q", vs)
			}
			if reps < 1 || warmup < 0 || refRows < 0 || timeout <= 0 {
				return usage(cmd, "--reps must be >= 1, --warmup and --ref-rows >= 0, --timeout > 0")
			}
			cases, err := bench.Select(bench.Selection{Ops: ops, Shapes: shapes, DTypes: dtypes})
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("seed") {
				seed = rand.Uint64() >> 1
			}
			eng, oracle, err := benchSides(python, timeout)
			if err != nil {
				return err
			}
			defer oracle.Close()
			opt := bench.Options{Reps: reps, Warmup: warmup, Seed: seed, RefRows: refRows, Log: e.stderr}
			fmt.Fprintf(e.stderr, "bench: %d cases against %s; seed %d (rerun with --seed %d)\n", len(cases), oracle.Describe(), seed, seed)
			started := time.Now()
			rows, dev, err := bench.Run(eng, oracle, cases, opt)
			if err != nil {
				return err
			}
			host, _ := os.Hostname()
			meta := bench.Meta{Machine: host, Started: started, Device: dev, Oracle: oracle.Describe(), Torch: oracle.Version(),
				Opt: opt, Command: benchCommand(cmd, seed)}
			bench.PrintTable(e.human(jsonPath), meta, rows)
			rep := bench.NewReport(meta, rows)
			if len(rep.Rows) > 0 {
				if err := e.writeJSON(jsonPath, rep); err != nil {
					return err
				}
			} else if jsonPath != "" {
				fmt.Fprintln(e.stderr, "bench: no case was timed; no JSON written")
			}
			for _, r := range rows {
				if !r.Passed() {
					return failed()
				}
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&vs, "vs", "", "the reference to compare with: torch")
	f.StringSliceVar(&ops, "ops", nil, "ops to run, comma-separated (default: all; see above)")
	f.StringSliceVar(&shapes, "shapes", nil, "shapes, comma-separated: AxB... for every op of that rank, op:AxB... for one op")
	f.StringSliceVar(&dtypes, "dtypes", nil, "dtypes to run (f32, f16, bf16, f64; default: each op's own)")
	f.IntVar(&reps, "reps", 20, "timed runs per side and case (the median is reported)")
	f.IntVar(&warmup, "warmup", 5, "untimed runs per side before the timed ones")
	f.IntVar(&refRows, "ref-rows", bench.DefaultRefRows, "rows (queries, rows of A) the engine/ref check keeps")
	f.Uint64Var(&seed, "seed", 0, "seed of the random inputs (default: random, printed)")
	f.StringVar(&python, "python", "", "Python interpreter with torch (default: $"+bench.PythonEnv+", else python3, /usr/bin/python3)")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "limit for each torch request")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

// benchCommand is the command line that reproduces the run (the seed made explicit).
func benchCommand(cmd *cobra.Command, seed uint64) string {
	parts := []string{"tessera-qa", "bench"}
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if fl.Name == "seed" || fl.Name == "json" {
			return
		}
		v := fl.Value.String()
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			v = strings.Join(sv.GetSlice(), ",")
		}
		parts = append(parts, "--"+fl.Name, v)
	})
	return strings.Join(append(parts, "--seed", fmt.Sprint(seed)), " ")
}
