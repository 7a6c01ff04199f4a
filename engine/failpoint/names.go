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

	// Verifier rules dropped (engine/graph): an invalid graph verifies and reaches a kernel.
	// Only negative tests catch them (suites/verifier), every other suite runs valid graphs.
	GraphSliceEndUnchecked     = "graph/verify/slice-end-unchecked"
	GraphAxisRangeUnchecked    = "graph/verify/axis-range-unchecked"
	GraphMatmulInnerUnchecked  = "graph/verify/matmul-inner-dims-unchecked"
	GraphDeclaredTypeUnchecked = "graph/verify/declared-type-unchecked"
	GraphRankBoundDropped      = "graph/verify/rank-bound-dropped"
	// The text format (engine/graph/text.go): a float attribute printed short.
	GraphTextFloatShort = "graph/text/float-printed-short"
	// Tensor files (engine/tensor): writer and reader agree with each other and not with
	// NumPy, so only a NumPy round trip (suites/numpyio) sees them.
	TensorNPYShapeReversed   = "tensor/npy/shape-reversed"
	TensorNPYU2BigEndian     = "tensor/npy/u2-big-endian"
	TensorNPYFortranAccepted = "tensor/npy/fortran-order-accepted"
)

// Shard pass rules (engine/compiler/shard.go): each breaks one rule for the layouts it
// applies to; every other layout still runs right.
const (
	ShardReduceNotCombined   = "compiler/shard/reduce-over-sharded-axis-not-combined"
	ShardMeanCombinedAsSum   = "compiler/shard/mean-combined-as-sum"
	ShardRowwiseShardsKept   = "compiler/shard/rowwise-axis-kept-sharded"
	ShardMatmulKSumDropped   = "compiler/shard/matmul-k-sum-dropped"
	ShardCausalQueriesSplit  = "compiler/shard/causal-queries-sharded"
	ShardReshapeMergeInnerOK = "compiler/shard/reshape-merge-keeps-inner-sharding"
)

// Frame checks (engine/dist/frame.go Expect.Check): each drops the receiver's check of one
// header field.
const (
	DistFrameSeqUnchecked   = "dist/frame/seq-unchecked"
	DistFramePartUnchecked  = "dist/frame/part-unchecked"
	DistFrameDTypeUnchecked = "dist/frame/dtype-unchecked"
	DistFrameCRCUnchecked   = "dist/frame/checksum-unchecked"
)

// Optimizer update rules (engine/optim): each changes one step of torch.optim's algorithm.
const (
	OptimSGDNesterovIgnored      = "optim/sgd/nesterov-ignored"
	OptimSGDFirstStepDampened    = "optim/sgd/first-step-dampened"
	OptimAdamWBiasCorrection2Off = "optim/adamw/bias-correction2-dropped"
	OptimAdamWDecayCoupled       = "optim/adamw/weight-decay-coupled"
	OptimAdamWEpsBeforeBC2       = "optim/adamw/eps-before-bias-correction"
	// Row kernels across tiles (issue 21): only a row whose tiles differ by more than exp's
	// range (or a tile of -Inf) shows them.
	CPUSoftmaxMaxFrozen    = "cpu/online-softmax/max-frozen-after-first-tile"
	LogSoftmaxFirstTileMax = "compiler/log-softmax/first-tile-max"

	// Accumulators narrower than the inputs (issue 21): only graphs that ask for one show them.
	MatmulNarrowAccumRoundedOnce = "compiler/matmul/narrow-accum-rounded-once"
	ReduceAccumIgnoredF64        = "compiler/reduce/accum-ignored-for-f64"
	// Distributed runtime: the reduction and the pipeline of every collective (issue 22),
	// caught by suites/collectives' bitwise specs against collectives/bitref.
	DistLastChunkReversed   = "dist/order/last-chunk-ranks-reversed"
	DistNarrowAccumInDType  = "dist/reduce/narrow-accumulates-in-dtype"
	DistExactDoubleRounding = "dist/exact/double-rounding"
	DistMaxZeroSignIgnored  = "dist/minmax/zero-sign-ignored"
	DistNaNPayloadKept      = "dist/reduce/nan-payload-kept"
	DistRaggedTailDropped   = "dist/pipeline/ragged-tail-dropped"
	// DistAllToAllChunksSwapped: all_to_all puts the chunks received from ranks 0 and 1 in each
	// other's place (issue 26: the pencil 2-D FFT's transposition), caught by the pencil specs'
	// bits against one rank (suites/sharded) and by the collectives' bitwise specs.
	DistAllToAllChunksSwapped = "dist/all-to-all/chunks-swapped"
)

// Pipeline parallelism (issue 27, training/pipeline.go): the gradient bugs the frameworks
// fixed, caught by suites/pipeline against the unpipelined run.
const (
	DistPPGradNotDividedByMicroBatches = "dist/pp/grad-not-divided-by-micro-batches"
	DistPPGradLastMicroBatchOnly       = "dist/pp/grad-last-micro-batch-only"
	// Expert parallelism (training/moe*.go), caught by suites/moe.
	DistMoEExpertGradTimesEP = "dist/moe/expert-grad-times-ep"
	DistMoETieBreakByBackend = "dist/moe/tie-break-by-backend"
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
		ShardReduceNotCombined, ShardMeanCombinedAsSum, ShardRowwiseShardsKept, ShardMatmulKSumDropped, ShardCausalQueriesSplit, ShardReshapeMergeInnerOK,
		DistFrameSeqUnchecked, DistFramePartUnchecked, DistFrameDTypeUnchecked, DistFrameCRCUnchecked,
		OptimSGDNesterovIgnored, OptimSGDFirstStepDampened, OptimAdamWBiasCorrection2Off, OptimAdamWDecayCoupled, OptimAdamWEpsBeforeBC2,
		EmptyReduceGarbage, EmptyKernelLaunched, // issue 21, empty tensors
		GraphSliceEndUnchecked, GraphAxisRangeUnchecked, GraphMatmulInnerUnchecked, GraphDeclaredTypeUnchecked,
		GraphRankBoundDropped, GraphTextFloatShort, TensorNPYShapeReversed, TensorNPYU2BigEndian, TensorNPYFortranAccepted,
		CPUSoftmaxMaxFrozen, LogSoftmaxFirstTileMax,
		MatmulNarrowAccumRoundedOnce, ReduceAccumIgnoredF64,
		DistLastChunkReversed, DistNarrowAccumInDType, DistExactDoubleRounding, DistMaxZeroSignIgnored,
		DistNaNPayloadKept, DistRaggedTailDropped,
		CPUDivFloorTruncates, ReduceEmptyAxesFirstOnly, // issue 21 (h/ops)
		DistPPGradNotDividedByMicroBatches, DistPPGradLastMicroBatchOnly, DistMoEExpertGradTimesEP, DistMoETieBreakByBackend, // issue 27
		CPUSDCBitFlipOneDevice,        // issue 25 (h/doctor)
		CPUMatmulKernelRunsTwice,      // issue 24 (h/prof)
		CPUFFTTwiddleRecurrence,       // issue 26 (h/spectral)
		DistAllToAllChunksSwapped,     // issue 26 (h/pencil)
		ConvFFTCropOffByOne,           // issue 26 (h/conv)
		GraphConvGradKernelNotFlipped, // issue 26 (h/convgrad)
	}
}

// CPUSDCBitFlipOneDevice is silent data corruption on one device (issue 25): the CPU backend
// instance whose ID is SDCDevice flips the lowest bit of the middle element of the first
// output of every kernel that its program's schedule calls a matmul kernel, after the kernel ran, as a bad ALU or
// memory cell of one device would. Every other instance computes right, so only a comparison
// of each device with the pinned bits (doctor's SDC scan) sees it.
const CPUSDCBitFlipOneDevice = "cpu/sdc/bit-flip-on-one-device"

// SDCDevice is the ID of the CPU backend instance that CPUSDCBitFlipOneDevice corrupts.
const SDCDevice = 1

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
	// PTXStoreOnePastEnd makes the thread that stores a tile's element at the last index of
	// the output also store it one element further, past the allocation: every result stays
	// right (no byte of any buffer changes), so only a memory checker sees it (suites/sanitizer,
	// memcheck, with the CUDA allocator's exact sizes).
	PTXStoreOnePastEnd = "ptx/store/one-past-the-end"
	// PTXReduceBarrierDropped drops the barrier of the fast reduction (reduce_fast.go) between
	// the fold phase's shared-memory partials and the combine phase that reads them: a
	// read-after-write race on shared memory that racecheck reports whether or not the bits
	// come out wrong on a given run.
	PTXReduceBarrierDropped = "ptx/reduce/combine-barrier-dropped"
)

// GPUNames lists the GPU code generator's and the CUDA backend's result faults.
func GPUNames() []string {
	return []string{PTXStoreMaskDropped, PTXLoadBarrierDropped, CUDAReduceTileFromSMs, PTXStoreOnePastEnd, PTXReduceBarrierDropped}
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

// Faults in the harness's own judges (issue 21, blind spot 6): each loosens or inverts one
// decision of a checker that turns a run into a verdict (chaos recovery, stress, collectives,
// the reporter's gate). The engine stays right; only the judges' unit tests can catch them.
const (
	// chaos/check.go Check: silent corruption, final bits, detection, resume point, step order.
	JudgeChaosStepBitsUnchecked    = "judge/chaos/step-bits-unchecked"
	JudgeChaosFinalDigestUnchecked = "judge/chaos/final-digest-unchecked"
	JudgeChaosAnyCodeDetects       = "judge/chaos/any-code-detects"
	JudgeChaosResumeUnchecked      = "judge/chaos/resume-point-unchecked"
	JudgeChaosStepOrderUnchecked   = "judge/chaos/step-order-unchecked"
	// stress: a loaded run against its alone digest; the leak rule's floor growth.
	JudgeStressToleranceForBits      = "judge/stress/tolerance-for-bits"
	JudgeStressLeakFromSecondWindow  = "judge/stress/leak-growth-from-second-window"
	JudgeCollectivesRtolOfMagnitudes = "judge/collectives/rtol-of-magnitudes"
	// report: perf levels, acknowledgements, the reproducibility tracker, flakiness.
	JudgeReportPValueInverted     = "judge/report/perf/p-value-inverted"
	JudgeReportBlockAboveWarn     = "judge/report/perf/block-above-warn"
	JudgeReportPerfAckAnySeries   = "judge/report/ack/perf-any-series"
	JudgeReportReproAckAnyDigest  = "judge/report/ack/repro-any-digest"
	JudgeReportReproNewestIsFirst = "judge/report/repro/newest-digest-accepted"
	JudgeReportFlakyFailuresOnly  = "judge/report/flaky/failures-only"
)

// JudgeNames lists the judges' faults, in the order above. They are in the catalogue the CI
// suites must catch (package mutate's judge layer), caught by the judges' own unit tests.
func JudgeNames() []string {
	return []string{
		JudgeChaosStepBitsUnchecked, JudgeChaosFinalDigestUnchecked, JudgeChaosAnyCodeDetects, JudgeChaosResumeUnchecked,
		JudgeChaosStepOrderUnchecked, JudgeStressToleranceForBits, JudgeStressLeakFromSecondWindow,
		JudgeCollectivesRtolOfMagnitudes, JudgeReportPValueInverted, JudgeReportBlockAboveWarn, JudgeReportPerfAckAnySeries,
		JudgeReportReproAckAnyDigest, JudgeReportReproNewestIsFirst, JudgeReportFlakyFailuresOnly,
	}
}

// Faults in the handling of empty tensors (a dim of size 0; issue 21, compiler/lower_empty.go).
const (
	// EmptyReduceGarbage fills the output of a sum over an empty axis (or a matmul with K = 0)
	// with 1 instead of the identity 0, as a fill that took the product's identity would.
	EmptyReduceGarbage = "compiler/empty/reduce-identity-wrong"
	// EmptyKernelLaunched lowers a kernel for an empty output too: its grid is 0, which the
	// Tile IR verifier refuses and cuLaunchKernel would refuse, so every graph with an empty
	// intermediate fails to compile.
	EmptyKernelLaunched = "compiler/empty/zero-grid-kernel-emitted"
)

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

// Issue 24 (h/prof): a slowdown that leaves every result right.
const (
	// CPUMatmulKernelRunsTwice makes the first matmul kernel of every CPU run execute its
	// whole grid twice, as a launch loop with an off-by-one retry would: the bits stay right
	// (grid points write disjoint outputs from unchanged inputs) and the kernel takes twice
	// as long, so only a profile sees it (its grid points run are 2x its grid).
	CPUMatmulKernelRunsTwice = "cpu/run/matmul-kernel-runs-twice"
)

// Spectral ops (issue 26): caught by the spectral accuracy suite's growth fit.
const CPUFFTTwiddleRecurrence = "cpu/fft/twiddle-recurrence"

// ConvFFTCropOffByOne: the conv -> FFT rewrite crops its cyclic result one point late on each
// spatial axis (engine/compiler/conv_fft.go), caught by suites/rewrite's numeric specs.
const ConvFFTCropOffByOne = "compiler/conv-fft/crop-offset-off-by-one"

// GraphConvGradKernelNotFlipped: the input gradient of conv1d/conv2d (engine/graph/vjp_conv.go)
// correlates dy with the kernel as it is instead of flipped on every spatial axis, the classic
// transposed-convolution slip: shapes stay right and a symmetric kernel still gives the right
// gradient, so only a numeric check of the input's gradient sees it.
const GraphConvGradKernelNotFlipped = "graph/conv-grad/kernel-not-flipped"
