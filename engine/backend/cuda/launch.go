package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// shape is one launch's configuration, as the PTX module's launch contract states it:
// Grid CTAs of Threads threads (1-D blocks) with Shared bytes of dynamic shared memory.
type shape struct {
	Grid    [3]int
	Threads int
	Shared  int
}

func (s shape) String() string {
	return fmt.Sprintf("grid=(%d,%d,%d) block=%d shared=%dB", s.Grid[0], s.Grid[1], s.Grid[2], s.Threads, s.Shared)
}

// Hardware limits of a launch (all CUDA devices since compute capability 3.0).
const (
	maxGridX  = 1<<31 - 1
	maxGridYZ = 65535
)

// validate rejects a shape the device cannot launch with E_UNSUPPORTED, before the driver
// answers with a bare CUDA_ERROR_INVALID_VALUE.
func (s shape) validate(info DeviceInfo, kernel string) error {
	bad := func(what string, args ...any) error {
		return errs.New(errs.Unsupported, "cuda:%d %s: kernel %s %s: %s", info.Ordinal, info.Name, kernel, s, fmt.Sprintf(what, args...))
	}
	switch {
	case s.Grid[0] < 1 || s.Grid[1] < 1 || s.Grid[2] < 1:
		return bad("empty grid")
	case s.Grid[0] > maxGridX || s.Grid[1] > maxGridYZ || s.Grid[2] > maxGridYZ:
		return bad("grid exceeds (%d,%d,%d)", maxGridX, maxGridYZ, maxGridYZ)
	case s.Threads < 1 || (info.MaxThreads > 0 && s.Threads > info.MaxThreads):
		return bad("block of %d threads, device allows 1..%d", s.Threads, info.MaxThreads)
	case s.Shared < 0 || (info.MaxSharedOptIn > 0 && s.Shared > info.MaxSharedOptIn):
		return bad("%d bytes of shared memory, device allows %d per block", s.Shared, info.MaxSharedOptIn)
	}
	return nil
}

// launch enqueues k on the owner's stream with one pointer argument per device address in
// args. Owner thread only. The launch itself reports only configuration errors; faults inside
// the kernel surface at the next synchronisation.
func (o *owner) launch(k *kernelFn, s shape, args []uint64) error {
	if err := s.validate(o.info, k.entry); err != nil {
		return err
	}
	// Above 48 KiB of dynamic shared memory a kernel must opt in, once per function.
	if s.Shared > k.dynShared {
		if err := o.a.check(o.a.cuFuncSetAttribute(k.fn, funcAttrMaxDynamicShared, int32(s.Shared)),
			"%s: kernel %s %s: cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", o.where(), k.entry, s); err != nil {
			return err
		}
		k.dynShared = s.Shared
	}
	// kernelParams is a void** array: entry i points at the value of parameter i (here a
	// CUdeviceptr). The driver copies the values during the call, so Go memory is enough;
	// both arrays are pinned so that the pointers they hold stay valid while C reads them.
	vals := append([]uint64(nil), args...)
	var params unsafe.Pointer
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(vals) > 0 {
		ptrs := make([]unsafe.Pointer, len(vals))
		pin.Pin(&vals[0])
		for i := range vals {
			ptrs[i] = unsafe.Pointer(&vals[i])
		}
		pin.Pin(&ptrs[0])
		params = unsafe.Pointer(&ptrs[0])
	}
	r := o.a.cuLaunchKernel(k.fn, uint32(s.Grid[0]), uint32(s.Grid[1]), uint32(s.Grid[2]),
		uint32(s.Threads), 1, 1, uint32(s.Shared), o.stream, params, nil)
	runtime.KeepAlive(vals)
	return o.a.check(r, "%s: kernel %s %s: cuLaunchKernel", o.where(), k.entry, s)
}

// sync waits for the owner's stream; what names the work being waited for in an error.
func (o *owner) sync(what string) error {
	return o.a.check(o.a.cuStreamSynchronize(o.stream), "%s: %s: cuStreamSynchronize", o.where(), what)
}
