package chaos

import (
	"context"
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// The device/* faults act on the GPU the rank's workload runs on (--backend cuda): a kernel
// that really faults, memory that is really gone. The CUDA backend maps what the driver says
// to E_ILLEGAL_ADDRESS and E_OOM; the rank fails and the group restarts in fresh processes
// (a context that saw an illegal address is dead for good).

func deviceAvailable(name string, r Run) error {
	if r.Backend != "cuda" {
		return unsupported("%s: the workload runs on the %s backend, not on a GPU (use --backend cuda on a GPU machine)", name, r.Backend)
	}
	if r.Transport == "inproc" {
		return unsupported("%s: a faulted CUDA context takes its whole process with it (use --transport tcp)", name)
	}
	return cuda.New(-1).Available()
}

// faultPTX stores to the address it is given: launched with an unmapped address, the kernel
// faults (CUDA_ERROR_ILLEGAL_ADDRESS), and the context is lost.
const faultPTX = `.version 8.0
.target sm_90
.address_size 64

.visible .entry chaos_fault(.param .u64 p)
{
	.reg .u64 %rd<2>;
	.reg .u32 %r<2>;
	ld.param.u64 %rd1, [p];
	mov.u32 %r1, 1;
	st.global.u32 [%rd1], %r1;
	ret;
}
`

// IllegalAddress is device/illegal-address: a kernel on the rank's GPU stores to an unmapped
// address. The rank's next step must fail with E_ILLEGAL_ADDRESS (mapped by the CUDA backend).
type IllegalAddress struct{}

func (*IllegalAddress) Name() string { return "device/illegal-address" }
func (*IllegalAddress) Site() Site   { return SiteRank }
func (*IllegalAddress) Available(r Run) error {
	return deviceAvailable("device/illegal-address", r)
}
func (*IllegalAddress) Expect(Run) Expect {
	return Expect{Detect: codes(errs.IllegalAddress), Restart: true}
}
func (*IllegalAddress) Inject(ctx context.Context, t Target) (string, error) {
	raw, err := cuda.OpenLocalRaw()
	if err != nil {
		return "", err
	}
	const bad = 0x10 // never mapped
	if err := raw.Launch(faultPTX, "chaos_fault", 1, 1, []uint64{bad}); err != nil {
		return fmt.Sprintf("the launch itself failed: %v", err), nil
	}
	err = raw.Sync(ctx)
	return fmt.Sprintf("kernel stored to %#x: %v", bad, err), nil
}

// OOM is device/oom: the rank's GPU memory is taken (allocations of Chunk bytes, default 1 GiB,
// until the driver refuses) and held until the rank ends, and the CUDA backend's caching
// allocator is trimmed, so that the rank's next step must allocate. That allocation must
// fail with E_OOM. (Without the trim the fault went undetected on the H100: after its first
// step the workload allocates nothing new, every buffer comes from the cache.)
type OOM struct {
	Chunk int64 `json:"chunk,omitempty"`
}

func (*OOM) Name() string          { return "device/oom" }
func (*OOM) Site() Site            { return SiteRank }
func (*OOM) Available(r Run) error { return deviceAvailable("device/oom", r) }
func (*OOM) Expect(Run) Expect     { return Expect{Detect: codes(errs.OOM), Restart: true} }
func (o *OOM) Inject(ctx context.Context, t Target) (string, error) {
	raw, err := cuda.OpenLocalRaw()
	if err != nil {
		return "", err
	}
	// The cache first: trimmed after the memory is taken, it would hand back exactly what the
	// next step needs (measured on the H100: the fault went undetected both without a trim
	// and with the trim after the allocations).
	trimmed := "the backend's cache was not trimmed"
	if b, err := backend.Get("cuda"); err == nil {
		if cb, ok := b.(*cuda.Backend); ok {
			if err := cb.Trim(); err != nil {
				trimmed = "trimming the backend's cache failed: " + err.Error()
			} else {
				trimmed = "the backend's cache trimmed first"
			}
		}
	}
	chunk := o.Chunk
	if chunk <= 0 {
		chunk = 1 << 30
	}
	// Down to 4 KiB: a small workload's whole step fits in the last MiB a coarser floor leaves.
	// The blocks are never freed: the memory stays taken until the rank's process ends.
	h, err := backend.TakeUntilOOM(ctx, func(n int64) (func() error, error) {
		p, err := raw.Alloc(int(n))
		return func() error { return raw.Free(p) }, err
	}, chunk, 1<<12)
	if err != nil {
		trimmed += "; taking stopped early: " + err.Error()
	}
	held := h.Bytes
	return fmt.Sprintf("holding %d MiB of device memory, %s", held>>20, trimmed), nil
}
