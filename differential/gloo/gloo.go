package gloo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Defaults of Config.
const (
	DefaultTimeout = 60 * time.Second
	DefaultIters   = 20
	DefaultWarmup  = 5
	// MinIters is the fewest timed repetitions Bench takes a median of (design.md §8).
	MinIters = 20
)

// Config says how to run the group.
type Config struct {
	// Python is the interpreter every rank runs under; "" means $TESSERA_QA_PYTHON, else
	// /usr/bin/python3 (Debian's python3-torch).
	Python string
	// World is the number of ranks (>= 1). Collective takes 0 to mean len(inputs).
	World int
	// Timeout bounds every wait (0: DefaultTimeout): the start (interpreter, torch import and
	// rendezvous of every rank) and then each step (the collective, or one size of a bench).
	// A rank that hangs or dies ends the whole group within it.
	Timeout time.Duration
	// Iters and Warmup are Bench's timed and untimed repetitions per size (0: DefaultIters,
	// DefaultWarmup); Iters must be >= MinIters.
	Iters, Warmup int
	// WorkDir is where the group's temporary directory is made ("" : os.TempDir()); the
	// directory (script, job, store, .npy files) is removed afterwards.
	WorkDir string
	// Log, when set, receives every rank's stderr. Error messages carry its tail either way.
	Log io.Writer
}

func (c Config) withDefaults() Config {
	if c.Python == "" {
		c.Python = os.Getenv(differential.PythonEnv)
	}
	if c.Python == "" {
		c.Python = differential.SystemPython
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Iters == 0 {
		c.Iters = DefaultIters
	}
	if c.Warmup == 0 {
		c.Warmup = DefaultWarmup
	}
	return c
}

// Ops are the collectives this package knows, as torch.distributed names them.
var Ops = []string{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"}

// Reds are the reductions of all_reduce and reduce_scatter. avg is not gloo's (it refuses
// ReduceOp.AVG): see Collective.
var Reds = []string{"sum", "max", "min", "avg"}

// DTypes are the dtypes a rank can hold; fp8 and bool have no torch 1.13 dtype that gloo moves.
var DTypes = []numerics.DType{numerics.F64, numerics.F32, numerics.F16, numerics.BF16, numerics.I32, numerics.I8}

func reduces(op string) bool { return op == "all_reduce" || op == "reduce_scatter" }
func splits(op string) bool {
	return op == "all_gather" || op == "reduce_scatter" || op == "all_to_all"
}

// checkOp validates op, red and root for world n; red is "" (or "none") for the data-only ops.
func checkOp(op, red string, root, n int) error {
	if !slices.Contains(Ops, op) {
		return errs.New(errs.Input, "gloo: unknown collective %q (want %s)", op, strings.Join(Ops, ", "))
	}
	if reduces(op) {
		if !slices.Contains(Reds, red) {
			return errs.New(errs.Input, "gloo %s: unknown reduction %q (want sum, max, min or avg)", op, red)
		}
	} else if red != "" && red != "none" {
		return errs.New(errs.Input, "gloo %s: takes no reduction, got %q", op, red)
	}
	if n < 1 {
		return errs.New(errs.Input, "gloo %s: world size %d (want >= 1)", op, n)
	}
	if op == "broadcast" && (root < 0 || root >= n) {
		return errs.New(errs.Input, "gloo broadcast: root %d outside world %d", root, n)
	}
	if op != "broadcast" && root != 0 {
		return errs.New(errs.Input, "gloo %s: root %d given, but only broadcast has a root", op, root)
	}
	return nil
}

func checkDType(op string, dt numerics.DType) error {
	if !slices.Contains(DTypes, dt) {
		return errs.New(errs.Unsupported, "gloo %s: dtype %s has no torch dtype gloo can move (want f64, f32, f16, bf16, int32 or int8)", op, dt)
	}
	return nil
}

// Collective runs one collective over len(inputs) gloo ranks, inputs[r] being rank r's input,
// and returns every rank's output. Every input has the same dtype and shape.
//
//   - all_reduce (red sum, max, min): each output has the input's shape. red avg: gloo refuses
//     ReduceOp.AVG, so avg is gloo's sum divided by the world size in float64 on the Go side
//     and rounded once to the dtype (float dtypes only; an integer sum may have wrapped, so
//     int avg is E_UNSUPPORTED).
//   - all_gather: the inputs concatenated along dim 0 in rank order (a scalar input gives [W]).
//   - broadcast: root's input on every rank (the other inputs only give the shape).
//   - all_to_all: dim 0 is split into W blocks; rank r gets block r of every rank, in rank
//     order (torch's all_to_all_single).
//   - reduce_scatter: block r of the reduction along dim 0, where gloo has it (torch 1.13 does
//     not: E_UNSUPPORTED).
//
// Errors: E_INPUT, E_SHAPE, E_DTYPE for bad arguments; E_UNSUPPORTED where gloo refuses the
// op or dtype (doc.go has the matrix); E_NO_DEVICE when the interpreter cannot import torch
// with gloo; E_COMM_INIT or E_TIMEOUT_COMM, naming the rank, when a rank hangs or dies.
func Collective(ctx context.Context, cfg Config, op string, red string, root int, inputs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if cfg.World == 0 {
		cfg.World = len(inputs)
	}
	cfg = cfg.withDefaults()
	p, err := plan(cfg, Request{Op: op, Red: red, Root: root, Inputs: inputs})
	if err != nil {
		return nil, err
	}
	outs, err := runCollective(ctx, cfg, job{
		Mode: "collective", Op: p.item.Op, Red: p.item.Red, Root: root, DType: p.item.DType, World: cfg.World,
	}, p.what, inputs)
	if err != nil {
		if u, ok := err.(*unsupported); ok {
			refusals.Store(p.key, u.msg)
			return nil, errs.New(errs.Unsupported, "gloo %s: %s", p.what, u.msg)
		}
		return nil, err
	}
	return p.finish(outs)
}

// Request is one collective: op, its reduction (all_reduce, reduce_scatter), broadcast's root,
// and every rank's input.
type Request struct {
	Op, Red string
	Root    int
	Inputs  []*tensor.Tensor
}

// planned is a checked request: what travels to the ranks, its name in messages, and what
// turns the ranks' outputs into the request's answer.
type planned struct {
	item item
	what string
	key  string // refusals' key
	dt   numerics.DType
	red  string
	n    int
}

// plan checks r against cfg.World and what gloo can do, before anything starts: a request
// gloo refused before (refusals) is refused again at once.
func plan(cfg Config, r Request) (*planned, error) {
	n, op, red, root, inputs := cfg.World, r.Op, r.Red, r.Root, r.Inputs
	if err := checkOp(op, red, root, n); err != nil {
		return nil, err
	}
	if len(inputs) != n {
		return nil, errs.New(errs.Input, "gloo %s: %d inputs for world %d (want one per rank)", op, len(inputs), n)
	}
	for r, t := range inputs {
		if t == nil {
			return nil, errs.New(errs.Input, "gloo %s: rank %d has no input", op, r)
		}
		if len(t.Data) != t.Len()*t.DType.Size() {
			return nil, errs.New(errs.Input, "gloo %s: rank %d's input %s holds %d bytes", op, r, t.TypeString(), len(t.Data))
		}
		if t.DType != inputs[0].DType {
			return nil, errs.New(errs.DType, "gloo %s: rank %d holds %s, rank 0 %s (every rank needs the same dtype)", op, r, t.DType, inputs[0].DType)
		}
		if !slices.Equal(t.Shape, inputs[0].Shape) {
			return nil, errs.New(errs.Shape, "gloo %s: rank %d holds %s, rank 0 %s (every rank needs the same shape)", op, r, t.TypeString(), inputs[0].TypeString())
		}
	}
	dt, shape := inputs[0].DType, inputs[0].Shape
	if err := checkDType(op, dt); err != nil {
		return nil, err
	}
	if splits(op) && op != "all_gather" && (len(shape) == 0 || shape[0]%n != 0) {
		return nil, errs.New(errs.Shape, "gloo %s: input %s: dim 0 must split into %d equal blocks", op, inputs[0].TypeString(), n)
	}
	if op == "all_gather" && inputs[0].Len() == 0 {
		// measured: gloo's allgather divides by the element count, and every rank dies of SIGFPE
		return nil, errs.New(errs.Unsupported, "gloo all_gather/%s on %d ranks: an empty input kills every rank with SIGFPE in torch 1.13's gloo; no oracle for it", dt, n)
	}
	wireRed := red
	if red == "avg" {
		if !dt.IsFloat() {
			return nil, errs.New(errs.Unsupported, "gloo %s/avg/%s: gloo has no avg, and an integer sum may wrap before it could be divided; no avg oracle for integers", op, dt)
		}
		wireRed = "sum" // divided by the world size in finish
	}
	what := fmt.Sprintf("%s/%s/%s on %d ranks", op, wireRed, dt, n)
	if !reduces(op) {
		what = fmt.Sprintf("%s/%s on %d ranks", op, dt, n)
		if op == "broadcast" {
			what = fmt.Sprintf("broadcast/%s/root%d on %d ranks", dt, root, n)
		}
	}
	key := refusalKey(cfg.Python, op, wireRed, dt)
	if msg, ok := refusals.Load(key); ok {
		return nil, errs.New(errs.Unsupported, "gloo %s: %s", what, msg)
	}
	return &planned{item: item{Op: op, Red: wireRed, Root: root, DType: dt.String()}, what: what, key: key, dt: dt, red: red, n: n}, nil
}

// finish checks the ranks' outputs and turns a wire sum back into the average asked for.
func (p *planned) finish(outs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	for r, o := range outs {
		if o.DType != p.dt {
			return nil, errs.New(errs.Internal, "gloo %s: rank %d returned %s", p.what, r, o.TypeString())
		}
		if p.red == "avg" {
			for i := range o.Len() {
				o.SetFloat64(i, o.Float64(i)/float64(p.n))
			}
		}
	}
	return outs, nil
}

// refusals remembers what gloo refused, per interpreter, so that a caller sweeping counts does
// not start a group per row only to hear the same refusal.
var refusals sync.Map

func refusalKey(python, op, red string, dt numerics.DType) string {
	return python + "\x00" + op + "\x00" + red + "\x00" + dt.String()
}

// runCollective writes the inputs, runs the group and reads every rank's output.
func runCollective(ctx context.Context, cfg Config, j job, what string, inputs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	dt := inputs[0].DType
	var outs []*tensor.Tensor
	prepare := func(dir string) error {
		for r, t := range inputs {
			if err := writeNPY(filepath.Join(dir, fmt.Sprintf("in%d.npy", r)), t); err != nil {
				return errs.Wrap(errs.Input, err, "gloo %s: input of rank %d", what, r)
			}
		}
		return nil
	}
	collect := func(dir string, _ [][][]float64, _ map[int]string) error {
		for r := range inputs {
			a, err := tensor.ReadNPYFile(filepath.Join(dir, fmt.Sprintf("out%d.npy", r)))
			if err != nil {
				return errs.Wrap(errs.Internal, err, "gloo %s: output of rank %d", what, r)
			}
			t, err := a.As(dt)
			if err != nil {
				return errs.Wrap(errs.Internal, err, "gloo %s: output of rank %d", what, r)
			}
			outs = append(outs, t)
		}
		return nil
	}
	if err := run(ctx, cfg, j, what, prepare, collect); err != nil {
		return nil, err
	}
	return outs, nil
}

func writeNPY(path string, t *tensor.Tensor) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := tensor.WriteNPY(f, t); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
