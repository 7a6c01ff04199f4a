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

	// CPU backend (engine/backend/cpu).
	CPUReduceRightToLeft     = "cpu/reduce/right-to-left"
	CPUSoftmaxSumNotRescaled = "cpu/online-softmax/sum-not-rescaled"
	CPUMMARaggedColumn       = "cpu/mma/ragged-column-skipped"
)

// Names lists every fault name, in the order above.
func Names() []string {
	return []string{
		MatmulKTailUnmasked, MatmulAccumBF16, MatmulTransposeBIgnored, AttentionCausalDiagonal,
		AttentionScaleSkipped, LayernormPaddingInVariance, LayernormEpsDropped, ReduceMeanPaddedCount,
		BroadcastSize1Stride, GeluApproxSwapped, CastIntSaturates, ConcatOffsetOffByOne,
		ScheduleReduceTileFromCores, SoftmaxMaxInitZero, FusionSkipsIntermediateRound,
		CPUReduceRightToLeft, CPUSoftmaxSumNotRescaled, CPUMMARaggedColumn,
	}
}

// Faults in the GPU code generator (engine/compiler/ptx). Only a GPU run can catch them, so
// they are not in Names (the catalogue the CPU suites of CI must catch); the GPU golden specs
// catch them on the GPU machine (docs/mutations.md, "GPU faults").
const (
	PTXStoreMaskDropped   = "ptx/store/boundary-mask-dropped"
	PTXLoadBarrierDropped = "ptx/load/barrier-dropped"
)

// GPUNames lists the GPU code generator's faults.
func GPUNames() []string { return []string{PTXStoreMaskDropped, PTXLoadBarrierDropped} }
