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
	LayerOptim    Layer = "optim"    // engine/optim: the optimizers' update rules
	LayerTensor   Layer = "tensor"   // engine/tensor: .npy and .npz files
)

// LayerJudge is the harness's own judges (chaos, stress, collectives, report): a fault
// there leaves the engine right and loosens or inverts one verdict, so only the judges' unit
// tests (suites with Suite.Judges) run against it.
const LayerJudge Layer = "judge"

// Layers lists every layer, in catalogue order.
var Layers = []Layer{LayerCompiler, LayerCPU, LayerNumerics, LayerGraph, LayerTensor, LayerDist, LayerOptim, LayerJudge}

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
	// Ops lists the graph ops whose results the fault can change (none for a judge fault).
	Ops []string `json:"ops"`
	// First (optional) names the suites written to catch the fault: a run that stops at the
	// first catch tries them before the others, so a fault that only one late suite can see
	// does not pay for every earlier one.
	First []string `json:"first,omitempty"`
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
	{Name: fp.ScheduleReduceTileFromCores, Layer: LayerCompiler, Hook: "engine/compiler/schedule.go defaultSchedule", Ops: []string{"reduce_sum", "reduce_mean", "reduce_max"}, First: []string{"determinism"},
		Breaks: "the default reduce tile width is divided by GOMAXPROCS (a split taken from the machine, like a split-K from the SM count): partial sums group differently per thread count, so bits change with GOMAXPROCS while staying within every tolerance"},
	{Name: fp.SoftmaxMaxInitZero, Layer: LayerCompiler, Hook: "engine/compiler/lower_rows.go lowerRowwise", Ops: []string{"softmax", "log_softmax"}, First: []string{"property"},
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
	{Name: fp.DistBucketOnlyFirstReduced, Layer: LayerDist, Hook: "engine/dist/dtensor/exec.go ExecBucket", Ops: []string{"all_reduce"}, First: []string{"training"},
		Breaks: "a mesh program's bucket step hands only its first tensor to the collective: every other weight gradient of a tensor-parallel step stays this rank's own, not summed over dp, and every rank still finishes without an error"},

	// Shard pass rules: each breaks one rule for the layouts it applies to; only a run of that
	// rule under those layouts (suites/sharded, "Each rule of the shard pass") shows it.
	{Name: fp.ShardReduceNotCombined, Layer: LayerCompiler, Hook: "engine/compiler/shard.go (*sharder).reduce", Ops: []string{"reduce_sum", "reduce_mean", "reduce_max"}, First: []string{"sharded"},
		Breaks: "a reduction over a sharded dim keeps each rank's partial result: no all_reduce is inserted, and every rank holds its own block's sum as the whole"},
	{Name: fp.ShardMeanCombinedAsSum, Layer: LayerCompiler, Hook: "engine/compiler/shard.go (*sharder).reduce", Ops: []string{"reduce_mean"}, First: []string{"sharded"},
		Breaks: "a mean over a sharded dim combines the ranks' local means with sum instead of avg: the result is the mesh axis's size times too large"},
	{Name: fp.ShardRowwiseShardsKept, Layer: LayerCompiler, Hook: "engine/compiler/shard.go (*sharder).rowwise", Ops: []string{"softmax", "log_softmax", "layernorm", "rmsnorm"}, First: []string{"sharded"},
		Breaks: "softmax and the norms run on a row that is sharded along its own axis without gathering it first: each rank normalises its block of the row alone"},
	{Name: fp.ShardMatmulKSumDropped, Layer: LayerCompiler, Hook: "engine/compiler/shard.go (*sharder).matmul", Ops: matmulOps, First: []string{"sharded"},
		Breaks: "a matmul whose K dim is sharded is not marked pending a sum over that axis: each rank's partial product stands as the whole result"},
	{Name: fp.ShardCausalQueriesSplit, Layer: LayerCompiler, Hook: "engine/compiler/shard.go (*sharder).attention", Ops: []string{"attention"}, First: []string{"sharded"},
		Breaks: "causal attention keeps the queries sharded along the sequence: each rank's causal mask counts positions from its own first query, so later blocks see too few keys"},
	{Name: fp.ShardReshapeMergeInnerOK, Layer: LayerCompiler, Hook: "engine/compiler/shard.go (*sharder).reshapeLayout", Ops: []string{"reshape"}, First: []string{"sharded"},
		Breaks: "a reshape that merges dims keeps an inner dim's sharding instead of gathering it: the merged dim's blocks are strided pieces, not the contiguous blocks its layout says"},

	// Frame checks: each drops the receiver's check of one header field; only a frame wrong
	// in that field alone (collectives/framefaults) shows it.
	{Name: fp.DistFrameSeqUnchecked, Layer: LayerDist, Hook: "engine/dist/frame.go (Expect).Check", Ops: []string{"all_gather"}, First: []string{"frames"},
		Breaks: "the receiver no longer compares a frame's call sequence number: a replayed frame of the previous all_gather is taken as this call's data"},
	{Name: fp.DistFramePartUnchecked, Layer: LayerDist, Hook: "engine/dist/frame.go (Expect).Check", Ops: []string{"all_reduce"}, First: []string{"frames"},
		Breaks: "the receiver no longer compares a frame's part: two pipeline segments of equal size swapped in transit are reduced into each other's place (the silent corruption the part field was added for)"},
	{Name: fp.DistFrameDTypeUnchecked, Layer: LayerDist, Hook: "engine/dist/frame.go (Expect).Check", Ops: []string{"all_gather"}, First: []string{"frames"},
		Breaks: "the receiver no longer compares a frame's dtype: int32 bytes labelled as such are taken as f32 data whenever the sizes agree"},
	{Name: fp.DistFrameCRCUnchecked, Layer: LayerDist, Hook: "engine/dist/frame.go (Expect).Check", Ops: []string{"all_gather"}, First: []string{"frames"},
		Breaks: "the receiver no longer verifies the payload's CRC32C: a bit flipped in transit becomes data"},

	// Optimizer update rules: every rank and rerun shares them, so only a reference of the
	// rule itself (package optimizers, run by suites/training) sees them.
	{Name: fp.OptimSGDNesterovIgnored, Layer: LayerOptim, Hook: "engine/optim/sgd.go (SGD).ub", Ops: optimOps, First: []string{"training"},
		Breaks: "SGD with nesterov=True steps along the momentum buffer as plain momentum does, instead of grad + momentum*buf: training still converges, a little differently"},
	{Name: fp.OptimSGDFirstStepDampened, Layer: LayerOptim, Hook: "engine/optim/sgd.go (SGD).ub", Ops: optimOps, First: []string{"training"},
		Breaks: "SGD's momentum buffer starts as (1-dampening)*grad on the first step instead of torch's copy of the grad: only configurations with dampening differ, and only in how the first steps weigh"},
	{Name: fp.OptimAdamWBiasCorrection2Off, Layer: LayerOptim, Hook: "engine/optim/adamw.go (AdamW).scalars", Ops: optimOps, First: []string{"training"},
		Breaks: "AdamW divides sqrt(exp_avg_sq) by 1 instead of sqrt(1-beta2^t): early steps are about sqrt(1-beta2^t) times too small, and the difference fades as t grows"},
	{Name: fp.OptimAdamWDecayCoupled, Layer: LayerOptim, Hook: "engine/optim/adamw.go (AdamW).ub", Ops: optimOps, First: []string{"training"},
		Breaks: "AdamW's weight decay is added to the gradient (Adam's L2 penalty, normalised by the second moment) instead of shrinking the param by 1-lr*wd: the decoupling AdamW exists for is gone"},
	{Name: fp.OptimAdamWEpsBeforeBC2, Layer: LayerOptim, Hook: "engine/optim/adamw.go (AdamW).ub", Ops: optimOps, First: []string{"training"},
		Breaks: "AdamW's denominator is (sqrt(v)+eps)/sqrt(1-beta2^t) instead of sqrt(v)/sqrt(1-beta2^t)+eps: eps is scaled by the bias correction, visible where v is near zero"},
	// issue 21, empty tensors (engine/compiler/lower_empty.go)
	{Name: fp.EmptyReduceGarbage, Layer: LayerCompiler, Hook: "engine/compiler/lower_empty.go emptyValue", Ops: []string{"reduce_sum", "matmul", "batch_matmul", "scaled_matmul"},
		Breaks: "the fill that stands for a sum over an empty axis (or a matmul with K = 0) writes 1, the identity of a product, instead of 0: a row with no tokens sums to 1, and every non-empty case still passes"},
	{Name: fp.EmptyKernelLaunched, Layer: LayerCompiler, Hook: "engine/compiler/lower.go lower", Ops: []string{"relu", "add", "softmax", "matmul", "reshape", "concat"},
		Breaks: "a kernel is lowered for an empty output too: its grid is 0 CTAs, which the Tile IR verifier refuses (and cuLaunchKernel would), so every graph with an empty value fails to compile with E_INTERNAL"},
	// Verifier rules dropped, a float printer cut short, tensor files NumPy disagrees with
	// (issue 21): each passes every suite of valid graphs and engine-only round trips.
	{Name: fp.GraphSliceEndUnchecked, Layer: LayerGraph, Hook: "engine/graph/ops.go sliceInfer", Ops: []string{"slice"},
		Breaks: "slice stops checking ends[i] <= dim: x[1:3] of a dim of 2 verifies, the kernel reads past the row (into the next row or the buffer's end) and the golden model panics"},
	{Name: fp.GraphAxisRangeUnchecked, Layer: LayerGraph, Hook: "engine/graph/ops.go axisInfer", Ops: []string{"softmax", "log_softmax"},
		Breaks: "softmax and log_softmax stop checking that axis is in [-rank, rank): softmax {axis=2} of a rank-2 tensor verifies and reaches lowering with an axis that does not exist"},
	{Name: fp.GraphMatmulInnerUnchecked, Layer: LayerGraph, Hook: "engine/graph/ops.go MatmulDims", Ops: []string{"matmul", "batch_matmul"},
		Breaks: "matmul stops checking that the inner dims agree: [2,3]x[4,5] verifies as [2,5] and the kernel sums over a K that one operand does not have (a silent wrong answer, or out-of-bounds reads)"},
	{Name: fp.GraphDeclaredTypeUnchecked, Layer: LayerGraph, Hook: "engine/graph/verify.go Verify", Ops: []string{"transpose", "relu"},
		Breaks: "Verify stops comparing a node's declared type with the type its op infers: a Go-built graph whose value says f32[2,3] where transpose makes f32[3,2] verifies, and buffers are sized by the wrong type"},
	{Name: fp.GraphRankBoundDropped, Layer: LayerGraph, Hook: "engine/graph/verify.go CheckType", Ops: []string{"relu"},
		Breaks: "CheckType stops bounding the rank at MaxRank: a Go-built rank-9 value verifies, past every fixed-size index array of the backends (the parser keeps its own bound)"},
	{Name: fp.GraphTextFloatShort, Layer: LayerGraph, Hook: "engine/graph/text.go formatFloat", Ops: []string{"attention", "layernorm", "rmsnorm", "full_like"},
		Breaks: "float attributes print with 6 significant digits (%g) instead of the shortest exact form: scale=1/3 reads back as 0.333333, so a stored failing case or a replay manifest runs another graph"},
	// I/O faults change no op's result; Ops names cast, the op that makes every dtype a file
	// carries, so that suites focused by op run a few specs under them rather than all.
	{Name: fp.TensorNPYShapeReversed, Layer: LayerTensor, Hook: "engine/tensor/npy.go npyHeaderBytes", Ops: []string{"cast"},
		Breaks: "the .npy writer writes the shape reversed (column-major, as a Fortran port would) and the reader reverses it back: the engine reads its own files right, NumPy reads a [2,3] output as [3,2]"},
	{Name: fp.TensorNPYU2BigEndian, Layer: LayerTensor, Hook: "engine/tensor/npy.go arrayOf", Ops: []string{"cast"},
		Breaks: "f16 and bf16 bit patterns go into '<u2' files big-endian, and the reader swaps them back: the engine round-trips, NumPy sees every 16-bit value byte-swapped"},
	{Name: fp.TensorNPYFortranAccepted, Layer: LayerTensor, Hook: "engine/tensor/npy.go parseHeader", Ops: []string{"cast"},
		Breaks: "the reader stops refusing fortran_order True and takes the column-major data as row-major: a NumPy array saved with np.asfortranarray arrives transposed in memory, without an error"},
	// Row kernels across tiles (issue 21): exact in real arithmetic, wrong only where a row's
	// tiles differ by more than exp's range, which the property suite's edge schedule draws first.
	{Name: fp.CPUSoftmaxMaxFrozen, Layer: LayerCPU, Hook: "engine/backend/cpu/reduce.go (*worker).onlineSoftmax", Ops: []string{"softmax", "log_softmax", "attention", "attention_lse", "attention_grad"}, First: []string{"determinism"},
		Breaks: "online softmax keeps the running max of the first tile with a finite value (alpha stays 1): exact until a later tile lies more than exp's range above it (88.7 in f32), where exp(x - m) overflows to Inf and the row becomes NaN"},
	{Name: fp.LogSoftmaxFirstTileMax, Layer: LayerCompiler, Hook: "engine/compiler/lower_rows.go lowerRowwise", Ops: []string{"log_softmax"}, First: []string{"determinism"},
		Breaks: "log_softmax shifts each row by the maximum of its first tile only and sums exp(x - m) over every tile: a later tile more than exp's range above the first overflows the sum (the row becomes -Inf), a first tile of -Inf makes it NaN"},
	// Accumulators narrower than the inputs (issue 21): no golden case and no agree/ref draw names
	// one; accum/bits and the rounding suite check every accepted combination bit for bit.
	{Name: fp.MatmulNarrowAccumRoundedOnce, Layer: LayerCompiler, Hook: "engine/compiler/lower.go lowerMatmul", Ops: matmulOps,
		Breaks: "a matmul asking for an accumulator narrower than f32 (accum=bf16, f16, fp8) accumulates in f64 and rounds once at the end: more accurate than asked, so within every tolerance, and not the bits Tile IR's rules give (a bf16 sum of 300 ones is 256, not 300)"},
	{Name: fp.ReduceAccumIgnoredF64, Layer: LayerCompiler, Hook: "engine/compiler/lower_rows.go lowerReduce", Ops: []string{"reduce_sum", "reduce_mean", "reduce_max"},
		Breaks: "a reduction of f64 operands ignores its accum attribute and accumulates in f64 (accum=f32 on f64 inputs gives the f64 sum, and reduce_max the unrounded max)"},

	// Issue 22: the reduction, exact mode and the pipeline of every collective, caught by
	// suites/collectives' bitwise specs (collectives/bitref); no tolerance sees the first
	// three and no small tensor the last.
	{Name: fp.DistLastChunkReversed, Layer: LayerDist, Hook: "engine/dist/pipeline.go (*call).pipelined", Ops: reduceOps,
		Breaks: "the owner of the last chunk adds the ranks' contributions in reverse order (rank n-1 first): deterministic bits change in one chunk only, by an ulp or so, inside every f32 tolerance, and every transport shares it"},
	{Name: fp.DistNarrowAccumInDType, Layer: LayerDist, Hook: "engine/dist/reduce.go sumNarrow", Ops: reduceOps,
		Breaks: "f16, bf16 and fp8 sums round the accumulator to their own dtype after every add instead of accumulating in f32 and rounding once"},
	{Name: fp.DistExactDoubleRounding, Layer: LayerDist, Hook: "engine/dist/exact/sum.go exactElem", Ops: reduceOps,
		Breaks: "exact mode's slow path rounds the exact sum to float64 and then to the dtype: a sum just above (or below) a dtype midpoint by less than a float64 ulp rounds the wrong way"},
	{Name: fp.DistMaxZeroSignIgnored, Layer: LayerDist, Hook: "engine/dist/reduce.go minMax", Ops: reduceOps,
		Breaks: "max and min treat -0 and +0 as equal and keep the first in rank order, so max(-0, +0) is -0 when rank 0 holds -0 (the contract's total order says +0)"},
	{Name: fp.DistNaNPayloadKept, Layer: LayerDist, Hook: "engine/dist/reduce.go sumF32", Ops: reduceOps,
		Breaks: "an f32 sum or avg that is NaN keeps the payload and sign the CPU's addition propagated instead of the canonical NaN, so host and device transports would disagree"},
	{Name: fp.DistRaggedTailDropped, Layer: LayerDist, Hook: "engine/dist/pipeline.go (*call).pipelined", Ops: reduceOps,
		Breaks: "a chunk of more than one 1 MiB segment loses its partial last segment: never sent, reduced or gathered, so those elements keep what the receive buffer held; tensors under 1 MiB per chunk are untouched"},
	// issue 21 (h/ops)
	{Name: fp.CPUDivFloorTruncates, Layer: LayerCPU, Hook: "engine/backend/cpu/divround.go floorDiv", Ops: []string{"div"},
		Breaks: "div rounding_mode=\"floor\" rounds toward zero, as C's '/' does: a negative quotient that is not an integer comes out one too high (-7 floor-div 2 gives -3), every other element stays right; the integer path (elementwise.go binaryIntRow) has the same hook"},
	{Name: fp.ReduceEmptyAxesFirstOnly, Layer: LayerCompiler, Hook: "engine/compiler/lower_rows.go lowerReduce", Ops: []string{"reduce_sum", "reduce_max", "reduce_mean"},
		Breaks: "a reduction written axes=[] is lowered over axis 0 only (the output type stays right): the kernel folds one column of the input, not every element"},
	// issue 27: pipeline parallelism's gradient bugs (TorchTitan, NeMo, AReaL and PyTorch each
	// fixed one), caught by suites/pipeline against the unpipelined run.
	{Name: fp.DistPPGradNotDividedByMicroBatches, Layer: LayerDist, Hook: "training/pipeline.go meanOf", Ops: pipelineOps, First: []string{"pipeline"},
		Breaks: "a pipeline stage sums its micro-batches' gradients without the mean's 1/m: every gradient m times too large while the loss stays right, so the loss curve of a run with a small lr still looks fine"},
	{Name: fp.DistPPGradLastMicroBatchOnly, Layer: LayerDist, Hook: "training/pipeline.go meanOf", Ops: pipelineOps, First: []string{"pipeline"},
		Breaks: "a pipeline stage keeps only the last micro-batch's gradients (assigned, not accumulated) and divides them by m: the gradient of one micro-batch, scaled down"},
	// issue 27: expert parallelism's bugs (DeepSpeed and PyTorch fixed expert gradients ep
	// times too large), caught by suites/moe.
	{Name: fp.DistMoEExpertGradTimesEP, Layer: LayerDist, Hook: "training/moe.go (*moeStep).reduce", Ops: moeOps, First: []string{"moe"},
		Breaks: "expert gradients are averaged over dp only, not over the world: an expert's gradient holds the tokens of its whole ep group, so it comes out ep times too large while the router's and the loss stay right"},
	{Name: fp.DistMoETieBreakByBackend, Layer: LayerDist, Hook: "training/moe_route.go TopK", Ops: moeOps, First: []string{"moe"},
		Breaks: "top-k breaks exact ties to the higher expert on the cpu backend and to the lower elsewhere, as a device top-k kernel with another tie order would: tokens with equal router scores go to other experts on another backend"},
	// issue 25 (h/doctor)
	{Name: fp.CPUSDCBitFlipOneDevice, Layer: LayerCPU, Hook: "engine/backend/cpu/backend.go (*Backend).Run", Ops: matmulOps, First: []string{"doctor"},
		Breaks: "silent data corruption on one device: the CPU backend instance with ID 1 flips the lowest bit of one element of every matmul kernel's output; instance 0, which every other suite uses, stays right"},
	{Name: fp.CPUMatmulKernelRunsTwice, Layer: LayerCPU, Hook: "engine/backend/cpu/backend.go (*Backend).RunProfiled", Ops: matmulOps, First: []string{"profile"},
		Breaks: "the first matmul kernel of every CPU run executes its whole grid twice: every bit stays right and the kernel takes twice as long, so only a profile sees it (2x its grid points run, and the slower kernel in a regression)"},
	{Name: fp.CPUFFTTwiddleRecurrence, Layer: LayerCPU, Hook: "engine/fftplan/plan.go twiddleTable", Ops: []string{"fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2"},
		First:  []string{"spectral"},
		Breaks: "the mixed-radix plan (engine/fftplan, which both backends run) computes its twiddle factors by the recurrence w_k = w_(k-1) * w_1 in the working precision: their error grows with k, so the transform's error grows like N instead of sqrt(log N) (the accuracy suite's growth fit)"},
	// issue 26 (h/pencil): the transposition of the sharded 2-D FFT.
	{Name: fp.DistAllToAllChunksSwapped, Layer: LayerDist, Hook: "engine/dist/collectives.go (*Comm).AllToAll", First: []string{"sharded"},
		Ops:    []string{"all_to_all", "fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "softmax", "log_softmax", "layernorm", "rmsnorm"},
		Breaks: "all_to_all puts the chunks it receives from ranks 0 and 1 in each other's place: every value arrives, in the wrong block, so a pencil 2-D FFT on 2 or more ranks transforms scrambled columns (its bits and its error against the definition both show it); one rank is untouched"},
	{Name: fp.ConvFFTCropOffByOne, Layer: LayerCompiler, Hook: "engine/compiler/conv_fft.go convByFFT", Ops: []string{"conv1d", "conv2d"},
		First:  []string{"rewrite"},
		Breaks: "the conv -> rfft o complex_mul o irfft rewrite crops the cyclic correlation one point late on every spatial axis: each output is its right neighbour's value (the last one wraps), so the shape is right and only a numeric comparison sees it"},
	// issue 26 (h/convgrad): the transposed convolution of the input's gradient. No CI suite
	// but the engine's runs a conv backward, so engine/graph's test against the definition's
	// loops is tried first (suites/gradients also fails with it).
	{Name: fp.GraphConvGradKernelNotFlipped, Layer: LayerGraph, Hook: "engine/graph/vjp_conv.go convInputGrad", Ops: []string{"conv1d", "conv2d"},
		First:  []string{"engine"},
		Breaks: "the input gradient of conv1d/conv2d correlates dy with the kernel unflipped: the forward and the weight and bias gradients stay right, the input's gradient is the one of the mirrored kernel (right only for a symmetric kernel)"},
}

// moeOps are the ops of the moe model's graphs (router, experts, loss).
var moeOps = []string{"matmul", "softmax", "gelu", "mse_loss"}

// pipelineOps are the ops whose gradients a pipeline stage accumulates (training's models).
var pipelineOps = []string{"matmul", "add", "gelu", "layernorm", "attention", "mse_loss"}

// optimOps are the ops of an optimizer's update graph.
var optimOps = []string{"mul", "add", "div", "sqrt", "cast"}

// reduceOps are the collectives whose reduction the dist faults of issue 22 change.
var reduceOps = []string{"all_reduce", "reduce_scatter"}

// Catalogue returns every planted fault, in a fixed order.
func Catalogue() []Fault {
	out := slices.Concat(catalogue, judgeCatalogue)
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

// judgeCatalogue is the judge layer, in failpoint.JudgeNames order: each fault loosens or
// inverts one decision of the harness's own judges at the line that makes it. None changes an
// engine result, so none has ops.
var judgeCatalogue = []Fault{
	{Name: fp.JudgeChaosStepBitsUnchecked, Layer: LayerJudge, Hook: "chaos/check.go Check",
		Breaks: "the chaos checker stops comparing each applied step's loss bits with the fault-free run's: silent corruption mid-run is no violation (what counts as recovered)"},
	{Name: fp.JudgeChaosFinalDigestUnchecked, Layer: LayerJudge, Hook: "chaos/check.go Check",
		Breaks: "the chaos checker calls the final parameters bit-identical whatever their digest: a recovery that ends on other bits passes (what counts as recovered)"},
	{Name: fp.JudgeChaosAnyCodeDetects, Layer: LayerJudge, Hook: "chaos/check.go detection",
		Breaks: "any failure after an injection counts as its detection, whatever the code: a killed rank reported as E_NAN_INF is \"detected\" (what counts as detected)"},
	{Name: fp.JudgeChaosResumeUnchecked, Layer: LayerJudge, Hook: "chaos/check.go Check",
		Breaks: "the chaos checker accepts any resume point: resuming past the newest committed checkpoint, before it (committed work lost) or from a damaged one passes (what counts as recovered)"},
	{Name: fp.JudgeChaosStepOrderUnchecked, Layer: LayerJudge, Hook: "chaos/check.go Check",
		Breaks: "the chaos checker takes every applied step for the one it expected next: a step applied twice or skipped after a resume passes (what counts as recovered)"},
	{Name: fp.JudgeStressToleranceForBits, Layer: LayerJudge, Hook: "stress/worker.go RunJob",
		Breaks: "stress jobs judge each loaded run against the golden model within tolerance instead of bit for bit against its alone digest: a loaded run with other bits is no mismatch (what counts as a mismatch)"},
	{Name: fp.JudgeStressLeakFromSecondWindow, Layer: LayerJudge, Hook: "stress/monitor.go Judge",
		Breaks: "the leak rule measures a monitor's floor growth from the second window instead of the first: a third less growth, so a leak up to 1.5 times its allowance passes (what counts as a leak)"},
	{Name: fp.JudgeCollectivesRtolOfMagnitudes, Layer: LayerJudge, Hook: "collectives/reference.go (*verifier).reduced",
		Breaks: "the collectives checker scales rtol by the contributions' magnitudes instead of the answer's: under cancellation a float sum far off the float64 answer is not counted in #wrong (what counts as wrong)"},
	{Name: fp.JudgeReportPValueInverted, Layer: LayerJudge, Hook: "report/perf.go (*DB).compare",
		Breaks: "the perf comparison reads the Mann-Whitney p-value the wrong way round: a significant slowdown is OK and noise past the smallest effect is judged by its size (what counts as a regression)"},
	{Name: fp.JudgeReportBlockAboveWarn, Layer: LayerJudge, Hook: "report/perf.go (*DB).compare",
		Breaks: "the block threshold is read as an increment over the warn threshold (block at warn+block, 25% by default): a slowdown just past the block threshold only warns (what counts as a regression)"},
	{Name: fp.JudgeReportPerfAckAnySeries, Layer: LayerJudge, Hook: "report/perf.go (*DB).perfAck",
		Breaks: "a perf acknowledgement of one series excuses the slowdown of every series at or after its run (what counts as excused)"},
	{Name: fp.JudgeReportReproAckAnyDigest, Layer: LayerJudge, Hook: "report/repro.go (*DB).reproState",
		Breaks: "a repro acknowledgement of one digest of a case accepts every new digest of it, also ones seen after the acknowledged one (what counts as excused)"},
	{Name: fp.JudgeReportReproNewestIsFirst, Layer: LayerJudge, Hook: "report/repro.go (*DB).reproState",
		Breaks: "the reproducibility tracker accepts a case's newest digest instead of its first: a new digest on the candidate commit is the reference and the old ones the regressions, so the gate passes it (what counts as reproducible)"},
	{Name: fp.JudgeReportFlakyFailuresOnly, Layer: LayerJudge, Hook: "report/store/read.go (*sqlStore).Outcomes",
		Breaks: "the outcomes query calls flaky every test that failed on a commit, not only those that also passed: a stable failure is a gate warning instead of a block (what counts as flaky)"},
}
