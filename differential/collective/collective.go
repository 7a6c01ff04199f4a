// Package collective checks the engine's collectives against torch.distributed with the gloo
// backend on the CPU (differential/gloo): the same seeded inputs go to W gloo ranks (W Python
// processes) and to the engine's rank program on W in-process ranks, and every rank's outputs
// are compared.
//
// Index:
//   - Row, Rows: one (op, reduction, dtype, world) to compare; the table the suite runs.
//   - Row.Graph, Row.Inputs, Row.Tolerance: the engine's program, each rank's inputs, the judge.
//   - Engine: the row on the engine (compiler.CompileDist, engine/dist/run on inproc ranks,
//     deterministic mode).
//   - Check: engine against gloo, as a harness.Result (pass, fail, error, or skip with gloo's
//     reason when gloo refuses the combination).
//
// # Tolerances
//
// Data movement (all_gather, broadcast, all_to_all), max and min, and every integer reduction
// are compared bit for bit: both sides copy bytes or pick one of the inputs, and integer sums
// wrap the same way. Float sum and avg take the output dtype's default tolerance
// (docs/tolerances.md) scaled for a sum of W terms, ForReduction(W): gloo adds in its own order
// and rounds to the dtype at every addition (f16 in f16), the engine adds in rank order in f32
// (f64 in f64) and rounds once. That bound holds relative to the result only when the terms
// do not cancel, so float16 sums draw positive inputs (uniform [0.5, 2]); f32 and f64 sums
// draw standard normal ones, whose roundoff (~1e-7 of the terms) stays far below the
// absolute part of their tolerance.
package collective

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/differential/gloo"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu" // the rank program's segments, if any
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/dist/run"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Suite is the suite name the results carry.
const Suite = "differential-gloo"

// DTypes are the dtypes the table covers: the float and int dtypes issue 9 names for gloo
// (f64, f32, int32) and the 16-bit floats (gloo moves bf16 as bytes and refuses to reduce it).
var DTypes = []numerics.DType{numerics.F64, numerics.F32, numerics.F16, numerics.BF16, numerics.I32}

// Worlds are the world sizes the table covers.
var Worlds = []int{2, 4}

// Row is one comparison: one collective over the whole world of World ranks.
type Row struct {
	Op    string // a gloo.Ops name: all_reduce, all_gather, reduce_scatter, broadcast, all_to_all
	Red   string // sum, max, min or avg for all_reduce and reduce_scatter; "" otherwise
	DType numerics.DType
	World int
}

// Rows is the table: every gloo.Ops op (with every reduction of gloo.Reds where it reduces) x
// DTypes x Worlds, in that order. Rows that gloo refuses stay in the table: Check reports them
// as skipped with gloo's reason.
func Rows() []Row {
	var out []Row
	for _, op := range gloo.Ops {
		reds := []string{""}
		if reduces(op) {
			reds = gloo.Reds
		}
		for _, red := range reds {
			for _, dt := range DTypes {
				for _, w := range Worlds {
					out = append(out, Row{Op: op, Red: red, DType: dt, World: w})
				}
			}
		}
	}
	return out
}

func reduces(op string) bool { return op == "all_reduce" || op == "reduce_scatter" }

// Name is "all_reduce/sum/f32/w2", or "all_gather/f32/w4" for the data-only ops.
func (r Row) Name() string {
	parts := []string{r.Op}
	if r.Red != "" {
		parts = append(parts, r.Red)
	}
	return strings.Join(append(parts, r.DType.String(), fmt.Sprintf("w%d", r.World)), "/")
}

// Root is broadcast's root: the last rank, so that a root stuck at 0 on either side shows.
func (r Row) Root() int {
	if r.Op == "broadcast" {
		return r.World - 1
	}
	return 0
}

// Shape is every rank's input shape: 7x3 for the reductions and broadcast (21 elements, which
// neither 2 nor 4 ranks split evenly, so engine/dist's chunks are ragged), 3x5 for all_gather,
// and 2W x 3 where dim 0 is split into W blocks (reduce_scatter, all_to_all).
func (r Row) Shape() []int {
	switch r.Op {
	case "all_gather":
		return []int{3, 5}
	case "reduce_scatter", "all_to_all":
		return []int{2 * r.World, 3}
	}
	return []int{7, 3}
}

// Graph is the engine's rank program: mesh dp=World, one collective over dp, dims 0 (gloo's
// all_gather and all_to_all_single join and split dim 0).
func (r Row) Graph() (*graph.Graph, error) {
	m, err := mesh.ParseMesh(fmt.Sprintf("dp=%d", r.World))
	if err != nil {
		return nil, err
	}
	b := graph.NewBuilder("gloo_" + strings.NewReplacer("/", "_").Replace(r.Name()))
	b.Mesh(m)
	x := b.Input("x", r.DType, r.Shape()...)
	attrs := graph.Attrs{"axis": graph.String("dp")}
	if r.Red != "" {
		attrs["op"] = graph.String(r.Red)
	}
	if r.Op == "broadcast" {
		attrs["root"] = graph.Int(int64(r.Root()))
	}
	b.Output(b.Op(r.Op, attrs, x))
	return b.Build()
}

// Seed is the row's seed, derived from its name (FNV-1a), as golden cases derive theirs.
func (r Row) Seed() uint64 {
	h := fnv.New64a()
	h.Write([]byte("tessera.gloo.seed.v1|" + r.Name()))
	return h.Sum64()
}

// Dist is the input distribution (see the package doc): positive for 16-bit float sums and
// averages, standard normal for other floats, ints in [-100, 100].
func (r Row) Dist() harness.Dist {
	switch {
	case !r.DType.IsFloat():
		return harness.Dist{Kind: harness.DistInt, Lo: -100, Hi: 100}
	case r.floatSum() && r.DType.Size() == 2:
		return harness.Dist{Kind: harness.DistUniform, Lo: 0.5, Hi: 2}
	}
	return harness.Dist{Kind: harness.DistNormal}
}

func (r Row) floatSum() bool { return r.DType.IsFloat() && (r.Red == "sum" || r.Red == "avg") }

// Inputs draws every rank's input: rank r's from SubSeed(Seed, "rank<r>").
func (r Row) Inputs() []*tensor.Tensor {
	out := make([]*tensor.Tensor, r.World)
	for k := range out {
		out[k] = harness.RandomTensor(r.DType, r.Shape(), harness.SubSeed(r.Seed(), fmt.Sprintf("rank%d", k)), r.Dist())
	}
	return out
}

// Tolerance judges every rank's output: ForReduction(World) of the dtype's default for float
// sum and avg, bitwise otherwise (see the package doc).
func (r Row) Tolerance() harness.Tolerance {
	if r.floatSum() {
		return harness.DefaultTolerance(r.DType).ForReduction(r.World)
	}
	return harness.Bitwise()
}

// Timeout bounds the engine's run (every collective also has dist.Options' own deadline).
const Timeout = 30 * time.Second

// Engine runs the row on the engine: Graph compiled with compiler.CompileDist, every rank a
// goroutine over the in-process transport (run.Inproc) in deterministic mode. It returns every
// rank's output.
func Engine(ctx context.Context, r Row, inputs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	g, err := r.Graph()
	if err != nil {
		return nil, err
	}
	dp, err := compiler.CompileDist(g, compiler.Options{})
	if err != nil {
		return nil, err
	}
	be, err := backend.Get("cpu")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	outs, err := run.Inproc(ctx, dp, be, dist.Options{Mode: dist.Deterministic}, rankMaps(inputs))
	if err != nil {
		return nil, err
	}
	res := make([]*tensor.Tensor, len(outs))
	for k, o := range outs {
		res[k] = o[0]
	}
	return res, nil
}

// engineRun is Engine; tests plant bugs through it.
var engineRun = Engine

// golden is the row on the golden model (ref.RunDist), for failure messages.
func golden(r Row, inputs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	g, err := r.Graph()
	if err != nil {
		return nil, err
	}
	outs, err := ref.RunDist(g, rankMaps(inputs))
	if err != nil {
		return nil, err
	}
	res := make([]*tensor.Tensor, len(outs))
	for k, o := range outs {
		res[k] = o[0]
	}
	return res, nil
}

func rankMaps(inputs []*tensor.Tensor) []map[string]*tensor.Tensor {
	out := make([]map[string]*tensor.Tensor, len(inputs))
	for k, x := range inputs {
		out[k] = map[string]*tensor.Tensor{"x": x}
	}
	return out
}

// Check runs the row on gloo (cfg.World is set to the row's) and on the engine, and compares
// every rank's output under Tolerance, gloo's being the expected value. The verdict is
//   - skip when gloo cannot compute the row: E_UNSUPPORTED with gloo's reason (a refused op or
//     dtype), or E_NO_DEVICE when the interpreter has no torch with gloo (callers decide
//     whether that may skip);
//   - error when gloo fails otherwise (a rank that hangs or dies) or the engine fails;
//   - fail when an output differs; the reason also says whether the golden model
//     (ref.RunDist) agrees with gloo, which tells an engine bug from a mapping one;
//   - pass otherwise.
//
// Outputs are reported per rank ("out@rank1"); Digest covers the engine's outputs in rank
// order; InputDigests are keyed "x@rank<r>".
func Check(ctx context.Context, cfg gloo.Config, r Row) harness.Result {
	start := time.Now()
	inputs := r.Inputs()
	cfg.World = r.World
	want, err := gloo.Collective(ctx, cfg, r.Op, r.Red, r.Root(), cloneAll(inputs))
	return judge(ctx, r, inputs, want, err, start, msSince(start))
}

// CheckAll is Check for every row, the rows of one world size in one gloo group
// (gloo.Batch), the two groups at once: the same results as Check row by row, without an
// interpreter start and rendezvous per row.
func CheckAll(ctx context.Context, cfg gloo.Config, rows []Row) []harness.Result {
	out := make([]harness.Result, len(rows))
	byWorld := map[int][]int{}
	for i, r := range rows {
		byWorld[r.World] = append(byWorld[r.World], i)
	}
	var wg sync.WaitGroup
	for w, idx := range byWorld {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			inputs := make([][]*tensor.Tensor, len(idx))
			reqs := make([]gloo.Request, len(idx))
			for k, i := range idx {
				r := rows[i]
				inputs[k] = r.Inputs()
				reqs[k] = gloo.Request{Op: r.Op, Red: r.Red, Root: r.Root(), Inputs: cloneAll(inputs[k])}
			}
			c := cfg
			c.World = w
			replies := gloo.Batch(ctx, c, reqs)
			refMS := msSince(start) / float64(len(idx)) // the group's time, shared by its rows
			for k, i := range idx {
				out[i] = judge(ctx, rows[i], inputs[k], replies[k].Outs, replies[k].Err, time.Now(), refMS)
			}
		}()
	}
	wg.Wait()
	return out
}

// judge compares the engine's run of row r on inputs with gloo's answer want (or its error).
func judge(ctx context.Context, r Row, inputs, want []*tensor.Tensor, err error, start time.Time, refMS float64) harness.Result {
	res := harness.Result{Schema: harness.ResultSchema, Suite: Suite, Case: r.Name(), Seed: r.Seed(),
		Labels: []string{"gloo", "inproc", dist.Deterministic.String()}, Backend: "cpu", Outputs: []harness.OutputResult{}}
	defer func() { res.Timing.TotalMS = msSince(start) }()
	res.InputDigests = map[string]string{}
	for k, x := range inputs {
		res.InputDigests[fmt.Sprintf("x@rank%d", k)] = x.Digest()
	}
	res.Timing.RefMS = refMS
	if err != nil {
		code := errs.CodeOf(err)
		res.Verdict, res.Reason, res.ErrorCode = harness.VerdictError, err.Error(), string(code)
		if code == errs.Unsupported || code == errs.NoDevice {
			res.Verdict = harness.VerdictSkip
		}
		return res
	}
	t0 := time.Now()
	got, err := engineRun(ctx, r, cloneAll(inputs))
	res.Timing.RunMS = msSince(t0)
	if err != nil {
		res.Verdict, res.Reason, res.ErrorCode = harness.VerdictError, "engine: "+err.Error(), string(errs.CodeOf(err))
		return res
	}
	res.Digest = harness.CombinedDigest(got)
	tol := r.Tolerance()
	var problems []string
	for k := range r.World {
		o := harness.OutputResult{Name: fmt.Sprintf("out@rank%d", k), DType: r.DType.String(),
			Digest: harness.Digests([]*tensor.Tensor{got[k]})[0], Check: harness.Check(got[k], want[k], tol)}
		if got[k] != nil {
			o.Shape = slices.Clone(got[k].Shape)
		}
		if !o.Check.Pass {
			problems = append(problems, fmt.Sprintf("rank %d: engine vs gloo: %s", k, o.Check.Reason))
		}
		res.Outputs = append(res.Outputs, o)
	}
	res.Verdict = harness.VerdictPass
	if len(problems) > 0 {
		res.Verdict, res.Reason = harness.VerdictFail, strings.Join(problems, "; ")+"; "+goldenVerdict(r, inputs, want, tol)
	}
	return res
}

// goldenVerdict says whether ref.RunDist agrees with gloo on every rank under tol.
func goldenVerdict(r Row, inputs, want []*tensor.Tensor, tol harness.Tolerance) string {
	ref, err := golden(r, inputs)
	if err != nil {
		return "the golden model failed: " + err.Error()
	}
	for k := range want {
		if c := harness.Check(ref[k], want[k], tol); !c.Pass {
			return fmt.Sprintf("the golden model disagrees with gloo too (rank %d: %s): check the mapping", k, c.Reason)
		}
	}
	return "the golden model agrees with gloo: the engine is off"
}

func cloneAll(ts []*tensor.Tensor) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(ts))
	for k, t := range ts {
		out[k] = t.Clone()
	}
	return out
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1e6 }
