package cuda

import (
	"context"
	"os"
	"runtime"
	"time"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Raw is direct access to one device for the packages that drive it themselves: the device
// transports (engine/dist/cudaipc, engine/dist/nccl). It is the smallest surface they need:
// dedicated allocations (exportable through CUDA IPC, unlike nothing else: the caching
// allocator's blocks are recycled behind an exporter's back), stream-ordered copies, kernel
// launches from PTX text, events (also interprocess), and Do for libraries that use the
// runtime API on the calling thread's current context (NCCL).
//
// Everything runs on the device's owner thread (owner.go) and on its one stream, so work
// enqueued through Raw is ordered with the backend's own kernels. Every method is one call to
// the owner; none blocks on the device except where it says so, and the waiting ones poll
// with a deadline instead of blocking in the driver, so a stuck peer or kernel becomes
// E_TIMEOUT instead of a hang.
type Raw struct {
	o    *owner
	info DeviceInfo
}

// OpenRaw returns the raw surface of device ordinal (-1: as the registered backend picks, localOrdinal).
// It fails as Backend.Available does: E_NO_DEVICE without a driver or device, E_UNSUPPORTED
// below compute capability 9.0.
func OpenRaw(ordinal int) (*Raw, error) {
	b := New(ordinal)
	if err := b.Available(); err != nil {
		return nil, err
	}
	return &Raw{o: b.o, info: b.info}, nil
}

// OpenLocalRaw opens the device of this process's local rank: $TESSERA_CUDA_DEVICE when set,
// else LOCAL_RANK (as torchrun and tessera-qa launch set it) modulo the visible devices, so the
// ranks of a multi-GPU node spread over its GPUs and every rank of a one-GPU machine shares
// device 0.
func OpenLocalRaw() (*Raw, error) {
	devs, err := Devices()
	if err != nil {
		return nil, err
	}
	ord, err := localOrdinal(os.Getenv, len(devs))
	if err != nil {
		return nil, err
	}
	return OpenRaw(ord)
}

// Info describes the device.
func (r *Raw) Info() DeviceInfo { return r.info }

// Stream is the owner's CUstream (the same handle as a runtime cudaStream_t): work enqueued
// on it by a library is ordered with everything else on the device.
func (r *Raw) Stream() uintptr { return r.o.stream }

// Do runs f on the owner thread, where the device's primary context is current. f must not
// block for long: every other user of the device waits for it.
func (r *Raw) Do(f func() error) error { return r.o.do(f) }

// Alloc is a dedicated cuMemAlloc of n bytes (at least 1): the pointer is the base of its own
// allocation, which is what cuIpcGetMemHandle exports. Free it with Free.
func (r *Raw) Alloc(n int) (uint64, error) {
	var p uint64
	err := r.o.do(func() error {
		return r.o.a.check(r.o.a.cuMemAlloc(&p, uint64(max(n, 1))), "%s: cuMemAlloc(%d bytes)", r.o.where(), n)
	})
	return p, err
}

// Free returns an Alloc'ed block to the driver (cuMemFree waits for work using it).
func (r *Raw) Free(p uint64) error {
	return r.o.do(func() error { return r.o.a.check(r.o.a.cuMemFree(p), "%s: cuMemFree(0x%x)", r.o.where(), p) })
}

// CopyAsync enqueues a device-to-device copy of n bytes on the stream (cuMemcpyDtoDAsync);
// either side may be a peer's memory mapped with ImportMem.
func (r *Raw) CopyAsync(dst, src uint64, n int) error {
	if n == 0 {
		return nil
	}
	return r.o.do(func() error {
		return r.o.a.check(r.o.a.cuMemcpyDtoDAsync(dst, src, uint64(n), r.o.stream),
			"%s: cuMemcpyDtoDAsync(0x%x <- 0x%x, %d bytes)", r.o.where(), dst, src, n)
	})
}

// Upload copies src to device address dst in stream order and returns once the device has
// it (src may be reused). ctx bounds the waits.
func (r *Raw) Upload(ctx context.Context, dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	// Drain first: a pageable host-to-device copy may wait for the stream inside the driver,
	// which must not happen unbounded on the owner thread.
	if err := r.Sync(ctx); err != nil {
		return err
	}
	err := r.o.do(func() error {
		var pin runtime.Pinner
		pin.Pin(&src[0])
		defer pin.Unpin()
		return r.o.a.check(r.o.a.cuMemcpyHtoDAsync(dst, unsafe.Pointer(&src[0]), uint64(len(src)), r.o.stream),
			"%s: cuMemcpyHtoDAsync(%d bytes)", r.o.where(), len(src))
	})
	if err != nil {
		return err
	}
	return r.Sync(ctx)
}

// Download copies len(dst) bytes from device address src once the stream's earlier work is
// done. ctx bounds the wait.
func (r *Raw) Download(ctx context.Context, dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	if err := r.Sync(ctx); err != nil {
		return err
	}
	return r.o.do(func() error { return r.o.d2h(dst, src) })
}

// Memset fills n bytes at p with v (synchronous, after the stream's earlier work).
func (r *Raw) Memset(ctx context.Context, p uint64, v byte, n int) error {
	if n == 0 {
		return nil
	}
	if err := r.Sync(ctx); err != nil {
		return err
	}
	return r.o.do(func() error {
		return r.o.a.check(r.o.a.cuMemsetD8(p, v, uint64(n)), "%s: cuMemsetD8(0x%x, %d bytes)", r.o.where(), p, n)
	})
}

// Launch enqueues kernel entry of ptx (JIT-compiled once per process and cached, like the
// backend's kernels) on grid blocks of threads threads, one .u64 parameter per arg.
func (r *Raw) Launch(ptx, entry string, grid, threads int, args []uint64) error {
	return r.o.do(func() error {
		k, err := r.o.function(ptx, entry)
		if err != nil {
			return err
		}
		return r.o.launch(k, shape{Grid: [3]int{grid, 1, 1}, Threads: threads}, args)
	})
}

// Event is a CUevent handle.
type Event uintptr

// CUevent_flags (cuda.h).
const (
	eventDisableTiming = 0x2
	eventInterprocess  = 0x4
)

// NewEvent creates an event: with timing for Elapsed, or (interprocess) without timing and
// exportable with ExportEvent, as cuIpcGetEventHandle requires.
func (r *Raw) NewEvent(interprocess bool) (Event, error) {
	var e uintptr
	flags := uint32(0)
	if interprocess {
		flags = eventDisableTiming | eventInterprocess
	}
	err := r.o.do(func() error {
		return r.o.a.check(r.o.a.cuEventCreate(&e, flags), "%s: cuEventCreate(flags 0x%x)", r.o.where(), flags)
	})
	return Event(e), err
}

// DestroyEvent releases an event (created or imported).
func (r *Raw) DestroyEvent(e Event) error {
	return r.o.do(func() error { return r.o.a.check(r.o.a.cuEventDestroy(uintptr(e)), "%s: cuEventDestroy", r.o.where()) })
}

// Record enqueues e on the stream: it completes when the work enqueued before it has.
func (r *Raw) Record(e Event) error {
	return r.o.do(func() error {
		return r.o.a.check(r.o.a.cuEventRecord(uintptr(e), r.o.stream), "%s: cuEventRecord", r.o.where())
	})
}

// WaitEvent makes work enqueued on the stream after it wait for e's most recent record (an
// imported event waits for the exporting process's record): cuStreamWaitEvent. The host does
// not wait.
func (r *Raw) WaitEvent(e Event) error {
	return r.o.do(func() error {
		return r.o.a.check(r.o.a.cuStreamWaitEvent(r.o.stream, uintptr(e), 0), "%s: cuStreamWaitEvent", r.o.where())
	})
}

// Done reports whether e's most recent record has completed (cuEventQuery).
func (r *Raw) Done(e Event) (bool, error) {
	var done bool
	err := r.o.do(func() error {
		switch res := r.o.a.cuEventQuery(uintptr(e)); res {
		case cudaSuccess:
			done = true
			return nil
		case cudaErrorNotReady:
			return nil
		default:
			return r.o.a.cuError(res, "%s: cuEventQuery", r.o.where())
		}
	})
	return done, err
}

// WaitDone polls e until it completes, ctx ends (E_TIMEOUT) or the device reports a fault.
// The owner thread is free between polls.
func (r *Raw) WaitDone(ctx context.Context, e Event, what string) error {
	start := time.Now()
	pause := 20 * time.Microsecond
	for {
		done, err := r.Done(e)
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return errs.New(errs.Timeout, "%s: %s: not finished on the device after %s", r.o.where(), what, time.Since(start).Round(time.Millisecond))
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Millisecond)
	}
}

// Sync waits, polling, until all work enqueued on the stream so far has completed.
func (r *Raw) Sync(ctx context.Context) error {
	e, err := r.NewEvent(false)
	if err != nil {
		return err
	}
	defer r.DestroyEvent(e)
	if err := r.Record(e); err != nil {
		return err
	}
	return r.WaitDone(ctx, e, "stream work")
}

// Elapsed is the time in milliseconds between two completed timing events.
func (r *Raw) Elapsed(start, end Event) (float64, error) {
	var ms float32
	err := r.o.do(func() error {
		return r.o.a.check(r.o.a.cuEventElapsedTime(&ms, uintptr(start), uintptr(end)), "%s: cuEventElapsedTime", r.o.where())
	})
	return float64(ms), err
}

// IPCMemHandle is CUipcMemHandle: 64 opaque bytes (CU_IPC_HANDLE_SIZE) naming an allocation
// to another process.
type IPCMemHandle struct{ Reserved [64]byte }

// IPCEventHandle is CUipcEventHandle: 64 opaque bytes naming an interprocess event.
type IPCEventHandle struct{ Reserved [64]byte }

// ipcMemLazyEnablePeerAccess is CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: map a handle from another
// device by enabling peer access on demand (on the same device it changes nothing).
const ipcMemLazyEnablePeerAccess = 0x1

// ExportMem returns the IPC handle of an Alloc'ed block (its base pointer).
func (r *Raw) ExportMem(p uint64) (IPCMemHandle, error) {
	var h IPCMemHandle
	err := r.o.do(func() error {
		return r.o.a.check(r.o.a.cuIpcGetMemHandle(&h, p), "%s: cuIpcGetMemHandle(0x%x)", r.o.where(), p)
	})
	return h, err
}

// ImportMem maps another process's block into this context and returns its address here.
// Each handle may be opened once per process (CUDA refuses a second open of the same
// allocation, and a handle exported by this process); close it with CloseMem before the
// exporter frees the block.
func (r *Raw) ImportMem(h IPCMemHandle) (uint64, error) {
	var p uint64
	err := r.o.do(func() error {
		return r.o.a.check(r.o.a.cuIpcOpenMemHandle(&p, h, ipcMemLazyEnablePeerAccess), "%s: cuIpcOpenMemHandle", r.o.where())
	})
	return p, err
}

// CloseMem unmaps an ImportMem'ed block.
func (r *Raw) CloseMem(p uint64) error {
	return r.o.do(func() error {
		return r.o.a.check(r.o.a.cuIpcCloseMemHandle(p), "%s: cuIpcCloseMemHandle(0x%x)", r.o.where(), p)
	})
}

// ExportEvent returns the IPC handle of an interprocess event.
func (r *Raw) ExportEvent(e Event) (IPCEventHandle, error) {
	var h IPCEventHandle
	err := r.o.do(func() error {
		return r.o.a.check(r.o.a.cuIpcGetEventHandle(&h, uintptr(e)), "%s: cuIpcGetEventHandle", r.o.where())
	})
	return h, err
}

// ImportEvent opens another process's interprocess event; destroy it with DestroyEvent before
// the exporter destroys the original.
func (r *Raw) ImportEvent(h IPCEventHandle) (Event, error) {
	var e uintptr
	err := r.o.do(func() error {
		return r.o.a.check(r.o.a.cuIpcOpenEventHandle(&e, h), "%s: cuIpcOpenEventHandle", r.o.where())
	})
	return Event(e), err
}
