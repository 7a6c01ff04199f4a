package mutate

import (
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	fp "github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// Layer is the part of the engine a fault breaks.
type Layer string

const (
	LayerCompiler Layer = "compiler" // engine/compiler: lowering to Tile IR, scheduling
	LayerCPU      Layer = "cpu"      // engine/backend/cpu: the Tile IR interpreter
	LayerNumerics Layer = "numerics" // engine/numerics: the conversions every layer shares
	LayerGraph    Layer = "graph"    // engine/graph: the op registry and the verifier
	LayerDist     Layer = "dist"     // engine/dist and the compiler's cut of rank programs: collectives
)

// Layers lists every layer, in catalogue order.
var Layers = []Layer{LayerCompiler, LayerCPU, LayerNumerics, LayerGraph, LayerDist}

// Fault is one planted bug. Every field is required: a zero field is a catalogue error
// (TestCatalogueIsComplete).
type Fault struct {
	// Name is the failpoint name (engine/failpoint), layer/area/bug.
	Name  string `json:"name"`
	Layer Layer  `json:"layer"`
	// Hook is the file and function whose code the fault changes.
	Hook string `json:"hook"`
	// Breaks says what goes wrong, in terms a reader of the code recognises.
	Breaks string `json:"breaks"`
	// Ops lists the graph ops whose results the fault can change.
	Ops []string `json:"ops"`
}

var (
	matmulOps      = []string{"matmul", "batch_matmul"}
	elementwiseOps = []string{"add", "sub", "mul", "div", "maximum", "minimum", "neg", "abs", "relu", "exp", "log", "sqrt",
		"rsqrt", "tanh", "sigmoid", "silu", "gelu", "cast"}
)

// catalogue is the flat list of planted bugs, in failpoint.Names order. Each is a bug that
// code in the real path could have, switched on at the line that would hold it; none edits
// outputs after the fact.
var catalogue = []Fault{
	{Name: fp.MatmulKTailUnmasked, Layer: LayerCompiler, Hook: "engine/compiler/lower.go lowerMatmul", Ops: matmulOps,
		Breaks: "the A and B tile loads lose their boundary mask, as in a kernel written for K a multiple of the tile: the last K tile reads past the row (the next row, or NaN past the buffer) into the sum"},
	{Name: fp.MatmulAccumBF16, Layer: LayerCompiler, Hook: "engine/compiler/lower.go lowerMatmul", Ops: matmulOps,
		Breaks: "matmuls accumulate in bf16 whatever the accum attribute and input dtype say: every partial sum keeps 8 significant bits"},
	{Name: fp.MatmulTransposeBIgnored, Layer: LayerCompiler, Hook: "engine/compiler/lower.go lowerMatmul", Ops: matmulOps,
		Breaks: "transpose_b is ignored for one layout: B stored [N,K] is read with the strides of [K,N]"},
	{Name: fp.AttentionCausalDiagonal, Layer: LayerCompiler, Hook: "engine/compiler/lower.go lowerAttention", Ops: []string{"attention"},
		Breaks: "the causal mask is off by one (hides key j >= i instead of j > i): each query loses its own key and query 0 has none left (0/0)"},
	{Name: fp.AttentionScaleSkipped, Layer: LayerCompiler, Hook: "engine/compiler/lower.go lowerAttention", Ops: []string{"attention"},
		Breaks: "attention scores are not multiplied by the scale (1/sqrt(d) by default), so the softmax is too peaked"},
	{Name: fp.LayernormPaddingInVariance, Layer: LayerCompiler, Hook: "engine/compiler/lower_rows.go lowerRowwise", Ops: []string{"layernorm"},
		Breaks: "the variance pass drops the column mask of the ragged last tile: each padding column (loaded as 0) adds (0-mean)^2 to the variance"},
	{Name: fp.LayernormEpsDropped, Layer: LayerCompiler, Hook: "engine/compiler/lower_rows.go lowerRowwise", Ops: []string{"layernorm"},
		Breaks: "layernorm computes 1/sqrt(var) instead of 1/sqrt(var+eps): off by about eps/(2 var) relative, Inf for a constant row"},
	{Name: fp.ReduceMeanPaddedCount, Layer: LayerCompiler, Hook: "engine/compiler/lower_rows.go lowerReduce", Ops: []string{"reduce_mean"},
		Breaks: "reduce_mean divides by the row length rounded up to the tile width instead of the number of reduced elements"},
	{Name: fp.BroadcastSize1Stride, Layer: LayerCompiler, Hook: "engine/compiler/lower.go broadcastStrides", Ops: []string{"add", "sub", "mul", "div", "maximum", "minimum"},
		Breaks: "a size-1 dim broadcast against a larger one keeps its contiguous stride instead of stride 0, so the operand is read at wrong (and out-of-bounds) offsets"},
	{Name: fp.GeluApproxSwapped, Layer: LayerCompiler, Hook: "engine/compiler/lower.go unaryOp", Ops: []string{"gelu"},
		Breaks: "gelu approx=erf is lowered to the tanh formula and approx=tanh to erf (they differ by up to about 5e-4)"},
	{Name: fp.CastIntSaturates, Layer: LayerCompiler, Hook: "engine/compiler/lower.go lowerElementwise", Ops: []string{"cast"},
		Breaks: "an int -> narrower int cast saturates instead of wrapping two's-complement as the cast op defines"},
	{Name: fp.ConcatOffsetOffByOne, Layer: LayerCompiler, Hook: "engine/compiler/lower_rows.go lowerMovement", Ops: []string{"concat"},
		Breaks: "each concat input after the first lands one slice early along the axis: it overwrites the previous input's last slice, the output's last slice stays unwritten, and grid points now race on the overlap"},
	{Name: fp.ScheduleReduceTileFromCores, Layer: LayerCompiler, Hook: "engine/compiler/schedule.go defaultSchedule", Ops: []string{"reduce_sum", "reduce_mean", "reduce_max"},
		Breaks: "the default reduce tile width is divided by GOMAXPROCS (a split taken from the machine, like a split-K from the SM count): partial sums group differently per thread count, so bits change with GOMAXPROCS while staying within every tolerance"},
	{Name: fp.SoftmaxMaxInitZero, Layer: LayerCompiler, Hook: "engine/compiler/lower_rows.go lowerRowwise", Ops: []string{"softmax", "log_softmax"},
		Breaks: "the running max of softmax starts at 0 instead of -Inf: exact in real arithmetic, but a row whose logits are all far below 0 underflows exp to 0 (0/0 for softmax, log 0 for log_softmax) or loses precision in subnormals"},
	{Name: fp.FusionSkipsIntermediateRound, Layer: LayerCompiler, Hook: "engine/compiler/lower.go lowerElementwise", Ops: elementwiseOps,
		Breaks: "a fused elementwise chain keeps its f16/bf16/fp8 intermediates in f32 registers instead of rounding each to its declared dtype, so the fused kernel disagrees with the graph it claims to compute"},
	{Name: fp.CanonCastDTypeIgnored, Layer: LayerCompiler, Hook: "engine/compiler/rewrite.go isNoop", Ops: []string{"cast"},
		Breaks: "canonicalize takes a cast to another dtype of the same shape for a no-op (it compares shapes, not types): the cast disappears and its readers see the source dtype"},
	{Name: fp.CanonTransposePermIgnored, Layer: LayerCompiler, Hook: "engine/compiler/rewrite.go isNoop", Ops: []string{"transpose"},
		Breaks: "canonicalize takes any transpose that keeps its type (a square one) for a no-op, without looking at the perm: x^T silently becomes x"},
	{Name: fp.CanonOutputRemoved, Layer: LayerCompiler, Hook: "engine/compiler/rewrite.go canonicalize", Ops: []string{"cast", "reshape", "transpose", "slice"},
		Breaks: "canonicalize also removes a no-op that produces a graph output and points the output at the no-op's input: the output loses its name (and may alias an input)"},
	{Name: fp.AttnFuseTransposeBUnchecked, Layer: LayerCompiler, Hook: "engine/compiler/rewrite.go fuseAttention", Ops: []string{"matmul", "batch_matmul", "softmax"},
		Breaks: "attention fusion forgets that the scores matmul must read k transposed: q·k (square k) is fused as q·k^T"},
	{Name: fp.AttnFuseTransposeAUnchecked, Layer: LayerCompiler, Hook: "engine/compiler/rewrite.go fuseAttention", Ops: []string{"matmul", "batch_matmul", "softmax"},
		Breaks: "attention fusion forgets that the value matmul must not transpose the probabilities: P^T·v (square P) is fused as P·v"},
	{Name: fp.AttnFuseAxisUnchecked, Layer: LayerCompiler, Hook: "engine/compiler/rewrite.go fuseAttention", Ops: []string{"matmul", "batch_matmul", "softmax"},
		Breaks: "attention fusion forgets the softmax axis: a softmax over the queries (axis 0 of square scores) is fused as one over the keys"},
	{Name: fp.AttnFuseAccumUnchecked, Layer: LayerCompiler, Hook: "engine/compiler/rewrite.go fuseAttention", Ops: []string{"softmax"},
		Breaks: "attention fusion swallows a softmax that names its own accumulator dtype: the fused kernel uses its default and the graph's accum is lost"},
	{Name: fp.AttnFuseSecondReaderIgnored, Layer: LayerCompiler, Hook: "engine/compiler/rewrite.go fuseAttention", Ops: []string{"matmul", "batch_matmul", "softmax"},
		Breaks: "attention fusion ignores that the scores or probabilities have another reader: the chain is computed twice, fused and unfused, with different rounding"},
	{Name: fp.FuseEltSecondReaderIgnored, Layer: LayerCompiler, Hook: "engine/compiler/rewrite.go fuseElementwise", Ops: elementwiseOps,
		Breaks: "elementwise fusion swallows a value another kernel reads: it lives only in the fused kernel's registers and the other kernel reads a buffer nobody wrote"},
	{Name: fp.FuseEltShapeUnchecked, Layer: LayerCompiler, Hook: "engine/compiler/rewrite.go fuseElementwise", Ops: elementwiseOps,
		Breaks: "elementwise fusion fuses a producer of another shape (a [1,N] operand broadcast into [M,N]) into its reader, recomputing it per element of the larger shape"},
	{Name: fp.FuseEltOutputFused, Layer: LayerCompiler, Hook: "engine/compiler/rewrite.go fuseElementwise", Ops: elementwiseOps,
		Breaks: "elementwise fusion fuses a graph output into its reader: the output is never stored"},
	{Name: fp.MovementDecodeEncode, Layer: LayerCompiler, Hook: "engine/compiler/lower_rows.go copyTile", Ops: []string{"transpose", "reshape", "slice", "concat"},
		Breaks: "data movement decodes and re-encodes instead of copying bits (the bug issue 13 fixed): fp8 e5m2 ±Inf becomes ±57344 and NaN payloads and signs are canonicalised"},
	{Name: fp.CPUReduceRightToLeft, Layer: LayerCPU, Hook: "engine/backend/cpu/reduce.go (*worker).reduce", Ops: []string{"reduce_sum", "reduce_mean", "layernorm", "rmsnorm", "mse_loss"},
		Breaks: "the Reduce instruction folds each row right to left instead of the left-to-right order Tile IR fixes: results move by rounding only, so tolerance checks pass"},
	{Name: fp.CPUSoftmaxSumNotRescaled, Layer: LayerCPU, Hook: "engine/backend/cpu/reduce.go (*worker).onlineSoftmax", Ops: []string{"softmax", "log_softmax", "attention"},
		Breaks: "online softmax updates the running sum as L + rowsum(P) instead of L*alpha + rowsum(P): when a later tile raises the running max, earlier terms are not rescaled"},
	{Name: fp.CPUMMARaggedColumn, Layer: LayerCPU, Hook: "engine/backend/cpu/mma.go mmaF32", Ops: []string{"matmul", "batch_matmul", "attention"},
		Breaks: "the f32 matmul micro-kernel's edge loop starts one column late: the first column past the last multiple of 8 keeps its initial 0 in every 4-row block"},
	{Name: fp.NumericsTiesAwayFromZero, Layer: LayerNumerics, Hook: "engine/numerics/format.go (*floatFormat).encode", Ops: []string{"cast"},
		Breaks: "conversions to f16, bf16 and fp8 round ties away from zero instead of to even, in every narrow format at once (the golden model too): every result moves by at most one ulp, which every tolerance admits"},
	{Name: fp.GraphAttrValuesUnchecked, Layer: LayerGraph, Hook: "engine/graph/registry.go InferNodeIn", Ops: []string{"gelu"},
		Breaks: "the verifier stops checking attribute values against the registry's lists: gelu approx=\"fast\" verifies and fails at lowering with E_INTERNAL"},
	{Name: fp.DistBucketSlicesReversed, Layer: LayerDist, Hook: "engine/dist/collectives.go (*Comm).AllReduceEach", Ops: []string{"all_reduce"},
		Breaks: "a bucket's reduced buffers go back in reverse order: each tensor of a data-parallel step gets another tensor's average (or a truncated piece of it), every rank alike, so the ranks agree with each other and the bits repeat"},
	{Name: fp.DistBucketOnlyFirstReduced, Layer: LayerDist, Hook: "engine/dist/dtensor/exec.go ExecBucket", Ops: []string{"all_reduce"},
		Breaks: "a mesh program's bucket step hands only its first tensor to the collective: every other weight gradient of a tensor-parallel step stays this rank's own, not summed over dp, and every rank still finishes without an error"},
	// issue 21 (h/ops)
	{Name: fp.CPUDivFloorTruncates, Layer: LayerCPU, Hook: "engine/backend/cpu/divround.go floorDiv", Ops: []string{"div"},
		Breaks: "div rounding_mode=\"floor\" rounds toward zero, as C's '/' does: a negative quotient that is not an integer comes out one too high (-7 floor-div 2 gives -3), every other element stays right; the integer path (elementwise.go binaryIntRow) has the same hook"},
	{Name: fp.ReduceEmptyAxesFirstOnly, Layer: LayerCompiler, Hook: "engine/compiler/lower_rows.go lowerReduce", Ops: []string{"reduce_sum", "reduce_max", "reduce_mean"},
		Breaks: "a reduction written axes=[] is lowered over axis 0 only (the output type stays right): the kernel folds one column of the input, not every element"},
}

// Catalogue returns every planted fault, in a fixed order.
func Catalogue() []Fault {
	out := slices.Clone(catalogue)
	for i := range out {
		out[i].Ops = slices.Clone(out[i].Ops)
	}
	return out
}

// SelectFaults returns the named faults in catalogue order (all for no names). A name may
// also be a prefix ending in '/', such as "cpu/" or "compiler/matmul/". An unknown name is
// E_INPUT.
func SelectFaults(names []string) ([]Fault, error) {
	all := Catalogue()
	if len(names) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		hit := false
		for _, f := range all {
			if f.Name == n || (strings.HasSuffix(n, "/") && strings.HasPrefix(f.Name, n)) {
				want[f.Name], hit = true, true
			}
		}
		if !hit {
			return nil, errs.New(errs.Input, "no fault %q (see tessera-qa mutate --list)", n)
		}
	}
	return slices.DeleteFunc(all, func(f Fault) bool { return !want[f.Name] }), nil
}
