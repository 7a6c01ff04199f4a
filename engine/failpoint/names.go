package failpoint

// EnvVar lists the faults a failpoints build switches on at start-up, comma-separated.
const EnvVar = "TESSERA_FAILPOINTS"

// Fault names: layer/area/bug. Each is hooked at the line that would hold the bug; package
// mutate describes what each breaks and which suites must catch it.
const (
	// Compiler lowering and scheduling (engine/compiler).
	MatmulKTailUnmasked          = "compiler/matmul/k-tail-unmasked"
	MatmulAccumBF16              = "compiler/matmul/accumulate-bf16"
	MatmulTransposeBIgnored      = "compiler/matmul/transpose-b-ignored"
	AttentionCausalDiagonal      = "compiler/attention/causal-masks-diagonal"
	AttentionScaleSkipped        = "compiler/attention/scale-skipped"
	LayernormPaddingInVariance   = "compiler/layernorm/padding-in-variance"
	LayernormEpsDropped          = "compiler/layernorm/eps-dropped"
	ReduceMeanPaddedCount        = "compiler/reduce/mean-divides-by-padded-count"
	BroadcastSize1Stride         = "compiler/elementwise/broadcast-size1-stride"
	GeluApproxSwapped            = "compiler/elementwise/gelu-approx-swapped"
	CastIntSaturates             = "compiler/cast/int-narrowing-saturates"
	ConcatOffsetOffByOne         = "compiler/concat/offset-off-by-one"
	ScheduleReduceTileFromCores  = "compiler/schedule/reduce-tile-from-core-count"
	SoftmaxMaxInitZero           = "compiler/softmax/running-max-init-zero"
	FusionSkipsIntermediateRound = "compiler/fusion/intermediate-not-rounded"

	// Graph rewrites (engine/compiler/rewrite.go): each drops one condition of a pattern
	// matcher, so a near-miss graph is rewritten when it must not be.
	CanonCastDTypeIgnored       = "compiler/canonicalize/cast-dtype-ignored"
	CanonTransposePermIgnored   = "compiler/canonicalize/transpose-perm-ignored"
	CanonOutputRemoved          = "compiler/canonicalize/output-noop-removed"
	AttnFuseTransposeBUnchecked = "compiler/fuse-attention/transpose-b-unchecked"
	AttnFuseTransposeAUnchecked = "compiler/fuse-attention/transpose-a-unchecked"
	AttnFuseAxisUnchecked       = "compiler/fuse-attention/softmax-axis-unchecked"
	AttnFuseAccumUnchecked      = "compiler/fuse-attention/accum-unchecked"
	AttnFuseSecondReaderIgnored = "compiler/fuse-attention/second-reader-ignored"
	FuseEltSecondReaderIgnored  = "compiler/fuse-elementwise/second-reader-ignored"
	FuseEltShapeUnchecked       = "compiler/fuse-elementwise/shape-unchecked"
	FuseEltOutputFused          = "compiler/fuse-elementwise/output-fused"
	MovementDecodeEncode        = "compiler/movement/copy-decodes-and-encodes"

	// CPU backend (engine/backend/cpu).
	CPUReduceRightToLeft     = "cpu/reduce/right-to-left"
	CPUSoftmaxSumNotRescaled = "cpu/online-softmax/sum-not-rescaled"
	CPUMMARaggedColumn       = "cpu/mma/ragged-column-skipped"

	// Conversions (engine/numerics): every backend and the golden model share them.
	NumericsTiesAwayFromZero = "numerics/round/ties-away-from-zero"

	// Graph IR verifier (engine/graph).
	GraphAttrValuesUnchecked = "graph/verify/attr-values-unchecked"

	// Distributed runtime (engine/dist, the compiler's cut of a rank program into steps):
	// gradient buckets.
	DistBucketSlicesReversed   = "dist/bucket/slices-reversed"
	DistBucketOnlyFirstReduced = "dist/bucket/only-first-reduced"
)

// Names lists every fault name, in the order above.
func Names() []string {
	return []string{
		MatmulKTailUnmasked, MatmulAccumBF16, MatmulTransposeBIgnored, AttentionCausalDiagonal,
		AttentionScaleSkipped, LayernormPaddingInVariance, LayernormEpsDropped, ReduceMeanPaddedCount,
		BroadcastSize1Stride, GeluApproxSwapped, CastIntSaturates, ConcatOffsetOffByOne,
		ScheduleReduceTileFromCores, SoftmaxMaxInitZero, FusionSkipsIntermediateRound,
		CanonCastDTypeIgnored, CanonTransposePermIgnored, CanonOutputRemoved,
		AttnFuseTransposeBUnchecked, AttnFuseTransposeAUnchecked, AttnFuseAxisUnchecked, AttnFuseAccumUnchecked,
		AttnFuseSecondReaderIgnored, FuseEltSecondReaderIgnored, FuseEltShapeUnchecked, FuseEltOutputFused,
		MovementDecodeEncode,
		CPUReduceRightToLeft, CPUSoftmaxSumNotRescaled, CPUMMARaggedColumn,
		NumericsTiesAwayFromZero, GraphAttrValuesUnchecked,
		DistBucketSlicesReversed, DistBucketOnlyFirstReduced,
		CPUDivFloorTruncates, ReduceEmptyAxesFirstOnly, // issue 21 (h/ops)
	}
}

// Faults in the GPU code generator (engine/compiler/ptx). Only a GPU run can catch them, so
// they are not in Names (the catalogue the CPU suites of CI must catch); the GPU golden specs
// catch them on the GPU machine (docs/mutations.md, "GPU faults").
const (
	PTXStoreMaskDropped   = "ptx/store/boundary-mask-dropped"
	PTXLoadBarrierDropped = "ptx/load/barrier-dropped"
	// CUDAReduceTileFromSMs re-tiles every reduction from the SM count of the context it runs
	// in, as a per-device tuning without a determinism guard would: the bits of a run still
	// repeat on one device (or partition), and change between SM partitions of different sizes,
	// which only the partitions suite's golden-on-partitions spec sees.
	CUDAReduceTileFromSMs = "cuda/schedule/reduce-tile-from-sm-count"
)

// GPUNames lists the GPU code generator's and the CUDA backend's result faults.
func GPUNames() []string {
	return []string{PTXStoreMaskDropped, PTXLoadBarrierDropped, CUDAReduceTileFromSMs}
}

// Faults that leave every result right and leak a resource instead: only a soak's leak
// monitors (package stress) catch them, so they are not in Names either; the stress suite and
// stress's unit tests catch them in a failpoints build.
const (
	// CPUBuffersKeptPerRun keeps every run's buffers reachable from a package-level list, as
	// a buffer cache that is filled and never evicted would.
	CPUBuffersKeptPerRun = "cpu/run/buffers-kept-per-run"
	// AutotuneCacheUnlocked updates the autotune cache's file without its lock: writers that
	// overlap each write a document without the other's entry (a lost write). Every file
	// stays whole and checksummed, so only processes hammering one cache catch it (the
	// stress runner's --pressure cache).
	AutotuneCacheUnlocked = "autotune/cache/update-without-lock"
	// CUDABuffersKeptPerRun forgets to hand a run's device buffers back to the caching
	// allocator: device memory leaks a program's buffers per run (the device monitors).
	CUDABuffersKeptPerRun = "cuda/run/buffers-kept-per-run"
)

// StressNames lists the faults only a soak catches.
func StressNames() []string {
	return []string{CPUBuffersKeptPerRun, AutotuneCacheUnlocked, CUDABuffersKeptPerRun}
}

// Issue 21 (h/ops): torch.div rounding modes and reductions over axes=[].
const (
	// CPUDivFloorTruncates rounds a floor division toward zero in the CPU backend, the bug of
	// a kernel that takes C's integer '/' (or trunc) for Python's '//': negative quotients
	// come out one too high (-7 // 2 gives -3, not -4); positive ones stay right.
	CPUDivFloorTruncates = "cpu/div/floor-truncates"
	// ReduceEmptyAxesFirstOnly lowers a reduction written axes=[] as if it named axis 0 only,
	// the bug of a lowering that reads "[]" as "the default axis" instead of "every axis";
	// the output type (from the graph) is right, the values are one row's sums.
	ReduceEmptyAxesFirstOnly = "compiler/reduce/empty-axes-first-only"
)
