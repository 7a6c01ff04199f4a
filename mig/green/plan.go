// Package green splits one GPU's SMs into partitions with CUDA green contexts (design.md §10):
// where MIG is disabled, the partitions of issue 12's isolation checks are SM groups made with
// cuDevSmResourceSplitByCount and cuGreenCtxCreate, each with its own stream.
//
// What green contexts isolate: the SMs. A kernel launched on a partition's stream runs only on
// that partition's SMs, so a neighbour cannot take its compute. What they do NOT isolate:
// device memory capacity and bandwidth, the L2 cache, the copy engines and the memory address
// space of the process (every partition of one process shares one virtual address space). Across
// processes, isolation of memory and faults comes from the separate CUDA contexts, not from the
// green contexts; without MPS, kernels of different processes time-slice instead of sharing SMs.
//
// The driver API is bound with purego (no cgo), as engine/backend/cuda does; every driver call
// of a partition runs on that partition's owner goroutine, locked to one OS thread.
package green

import (
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Granularity is the SM group size of the H100's green contexts (measured, design.md §10):
// cuDevSmResourceSplitByCount rounds a group's minimum SM count up to a multiple of 8.
const Granularity = cuda.SMGranularity

// Plan is the SM count per group that Split asks for: groups equal groups of the largest
// multiple of Granularity that fits total/groups SMs, or minSMs rounded up to Granularity when
// minSMs > 0. It fails (E_INPUT) when the groups do not fit total SMs or the arguments make no
// sense. On 132 SMs: Plan(132, 2, 0) = 64, Plan(132, 4, 0) = 32, Plan(132, 2, 66) fails (72 x 2
// > 132), which is what the driver does too (it returns one group of 72).
func Plan(total, groups, minSMs int) (int, error) {
	if total <= 0 {
		return 0, errs.New(errs.Input, "green: plan %d groups of %d SMs: the device has %d SMs", groups, minSMs, total)
	}
	if groups < 1 {
		return 0, errs.New(errs.Input, "green: plan %d groups: need at least 1", groups)
	}
	if minSMs < 0 {
		return 0, errs.New(errs.Input, "green: plan: minimum SM count %d is negative", minSMs)
	}
	size := (minSMs + Granularity - 1) / Granularity * Granularity
	if minSMs == 0 {
		size = total / groups / Granularity * Granularity
	}
	if size == 0 {
		return 0, errs.New(errs.Input, "green: %d groups of %d SMs: less than %d SMs per group", groups, total, Granularity)
	}
	if size*groups > total {
		return 0, errs.New(errs.Input, "green: %d groups of %d SMs (%d rounded up to a multiple of %d) need %d SMs, the device has %d",
			groups, size, minSMs, Granularity, size*groups, total)
	}
	return size, nil
}
