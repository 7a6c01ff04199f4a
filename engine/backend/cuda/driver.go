package cuda

import (
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// cuResult is the driver's CUresult. Declared with an int32 kind so that purego keeps only the
// low 32 bits of the return register, which is all the C enum defines.
type cuResult int32

// api is the part of the CUDA driver API the backend uses, bound with purego. Types follow the
// 64-bit C signatures: CUdevice is int, CUdeviceptr and size_t are 64-bit, handles are pointers
// (uintptr here, never dereferenced in Go).
type api struct {
	cuInit             func(flags uint32) cuResult
	cuDriverGetVersion func(v *int32) cuResult
	cuGetErrorName     func(r cuResult, s **byte) cuResult
	cuGetErrorString   func(r cuResult, s **byte) cuResult

	cuDeviceGetCount     func(n *int32) cuResult
	cuDeviceGet          func(dev *int32, ordinal int32) cuResult
	cuDeviceGetName      func(name *byte, n int32, dev int32) cuResult
	cuDeviceGetAttribute func(v *int32, attr int32, dev int32) cuResult
	cuDeviceTotalMem     func(bytes *uint64, dev int32) cuResult
	cuDeviceGetUuid      func(uuid *[16]byte, dev int32) cuResult

	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) cuResult
	cuDevicePrimaryCtxRelease func(dev int32) cuResult
	cuCtxSetCurrent           func(ctx uintptr) cuResult
	cuCtxSynchronize          func() cuResult

	cuMemAlloc   func(p *uint64, n uint64) cuResult
	cuMemFree    func(p uint64) cuResult
	cuMemGetInfo func(free, total *uint64) cuResult
	cuMemcpyHtoD func(dst uint64, src unsafe.Pointer, n uint64) cuResult
	cuMemcpyDtoH func(dst unsafe.Pointer, src uint64, n uint64) cuResult
	cuMemcpyDtoD func(dst, src uint64, n uint64) cuResult
	cuMemsetD8   func(dst uint64, v uint8, n uint64) cuResult

	cuModuleLoadDataEx  func(mod *uintptr, image unsafe.Pointer, n uint32, opts *int32, vals *uintptr) cuResult
	cuModuleGetFunction func(fn *uintptr, mod uintptr, name string) cuResult
	cuModuleUnload      func(mod uintptr) cuResult
	cuFuncSetAttribute  func(fn uintptr, attr int32, v int32) cuResult
	cuFuncGetAttribute  func(v *int32, attr int32, fn uintptr) cuResult
	cuLaunchKernel      func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra unsafe.Pointer) cuResult

	cuStreamCreate      func(s *uintptr, flags uint32) cuResult
	cuStreamSynchronize func(s uintptr) cuResult
	cuStreamDestroy     func(s uintptr) cuResult
	cuEventCreate       func(e *uintptr, flags uint32) cuResult
	cuEventRecord       func(e, s uintptr) cuResult
	cuEventSynchronize  func(e uintptr) cuResult
	cuEventElapsedTime  func(ms *float32, start, end uintptr) cuResult
	cuEventDestroy      func(e uintptr) cuResult

	// Used by Raw (raw.go): stream-ordered copies, cross-stream and cross-process ordering, and
	// CUDA IPC. The IPC handles are 64-byte structs passed by value (purego puts them on the
	// stack, as the System V ABI does for aggregates over 16 bytes).
	cuMemcpyDtoDAsync    func(dst, src uint64, n uint64, s uintptr) cuResult
	cuMemcpyHtoDAsync    func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) cuResult
	cuStreamWaitEvent    func(s, e uintptr, flags uint32) cuResult
	cuEventQuery         func(e uintptr) cuResult
	cuIpcGetMemHandle    func(h *IPCMemHandle, p uint64) cuResult
	cuIpcOpenMemHandle   func(p *uint64, h IPCMemHandle, flags uint32) cuResult
	cuIpcCloseMemHandle  func(p uint64) cuResult
	cuIpcGetEventHandle  func(h *IPCEventHandle, e uintptr) cuResult
	cuIpcOpenEventHandle func(e *uintptr, h IPCEventHandle) cuResult

	// Stream-ordered copies and fills of the execution path (memory.go): with several streams
	// on one device (lanes, green partitions) the legacy stream's synchronous copies would not
	// be ordered with a non-blocking stream's kernels.
	cuMemcpyDtoHAsync func(dst unsafe.Pointer, src uint64, n uint64, s uintptr) cuResult
	cuMemsetD8Async   func(dst uint64, v uint8, n uint64, s uintptr) cuResult

	// Profiling (profile.go): theoretical occupancy of a kernel at its launch shape.
	cuOccupancyMaxActiveBlocksPerMultiprocessor func(n *int32, fn uintptr, blockSize int32, dynShared uint64) cuResult

	// Green contexts (CUDA 12.4+), bound only where the driver has them (optionalBindings):
	// a nil field means a placement on an SM partition is E_UNSUPPORTED.
	cuDeviceGetDevResource      func(dev int32, res *SMResource, typ int32) cuResult
	cuDevSmResourceSplitByCount func(result *SMResource, nbGroups *uint32, input *SMResource, remaining *SMResource, useFlags uint32, minCount uint32) cuResult
	cuDevResourceGenerateDesc   func(desc *uintptr, res *SMResource, n uint32) cuResult
	cuGreenCtxCreate            func(g *uintptr, desc uintptr, dev int32, flags uint32) cuResult
	cuCtxFromGreenCtx           func(ctx *uintptr, g uintptr) cuResult
	cuGreenCtxStreamCreate      func(s *uintptr, g uintptr, flags uint32, priority int32) cuResult
	cuGreenCtxGetDevResource    func(g uintptr, res *SMResource, typ int32) cuResult
}

// binding names the C symbols that may implement one api field, best first. The driver keeps
// old entry points for old binaries, so the versioned names (_v2) are the ones with today's
// semantics: cuMemAlloc is the 32-bit-size variant from CUDA 3.1, cuEventElapsedTime_v2 (12.8+)
// is the name CUDA 13 headers bind.
type binding struct {
	fn    any
	names []string
}

func (a *api) bindings() []binding {
	return []binding{
		{&a.cuInit, []string{"cuInit"}},
		{&a.cuDriverGetVersion, []string{"cuDriverGetVersion"}},
		{&a.cuGetErrorName, []string{"cuGetErrorName"}},
		{&a.cuGetErrorString, []string{"cuGetErrorString"}},
		{&a.cuDeviceGetCount, []string{"cuDeviceGetCount"}},
		{&a.cuDeviceGet, []string{"cuDeviceGet"}},
		{&a.cuDeviceGetName, []string{"cuDeviceGetName"}},
		{&a.cuDeviceGetAttribute, []string{"cuDeviceGetAttribute"}},
		{&a.cuDeviceTotalMem, []string{"cuDeviceTotalMem_v2"}},
		{&a.cuDeviceGetUuid, []string{"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}},
		{&a.cuDevicePrimaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}},
		{&a.cuDevicePrimaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}},
		{&a.cuCtxSetCurrent, []string{"cuCtxSetCurrent"}},
		{&a.cuCtxSynchronize, []string{"cuCtxSynchronize"}},
		{&a.cuMemAlloc, []string{"cuMemAlloc_v2"}},
		{&a.cuMemFree, []string{"cuMemFree_v2"}},
		{&a.cuMemGetInfo, []string{"cuMemGetInfo_v2"}},
		{&a.cuMemcpyHtoD, []string{"cuMemcpyHtoD_v2"}},
		{&a.cuMemcpyDtoH, []string{"cuMemcpyDtoH_v2"}},
		{&a.cuMemcpyDtoD, []string{"cuMemcpyDtoD_v2"}},
		{&a.cuMemsetD8, []string{"cuMemsetD8_v2"}},
		{&a.cuModuleLoadDataEx, []string{"cuModuleLoadDataEx"}},
		{&a.cuModuleGetFunction, []string{"cuModuleGetFunction"}},
		{&a.cuModuleUnload, []string{"cuModuleUnload"}},
		{&a.cuFuncSetAttribute, []string{"cuFuncSetAttribute"}},
		{&a.cuFuncGetAttribute, []string{"cuFuncGetAttribute"}},
		{&a.cuLaunchKernel, []string{"cuLaunchKernel"}},
		{&a.cuStreamCreate, []string{"cuStreamCreate"}},
		{&a.cuStreamSynchronize, []string{"cuStreamSynchronize"}},
		{&a.cuStreamDestroy, []string{"cuStreamDestroy_v2"}},
		{&a.cuEventCreate, []string{"cuEventCreate"}},
		{&a.cuEventRecord, []string{"cuEventRecord"}},
		{&a.cuEventSynchronize, []string{"cuEventSynchronize"}},
		{&a.cuEventElapsedTime, []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}},
		{&a.cuEventDestroy, []string{"cuEventDestroy_v2"}},
		{&a.cuMemcpyDtoDAsync, []string{"cuMemcpyDtoDAsync_v2"}},
		{&a.cuMemcpyHtoDAsync, []string{"cuMemcpyHtoDAsync_v2"}},
		{&a.cuStreamWaitEvent, []string{"cuStreamWaitEvent"}},
		{&a.cuEventQuery, []string{"cuEventQuery"}},
		{&a.cuIpcGetMemHandle, []string{"cuIpcGetMemHandle"}},
		{&a.cuIpcOpenMemHandle, []string{"cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"}},
		{&a.cuIpcCloseMemHandle, []string{"cuIpcCloseMemHandle"}},
		{&a.cuIpcGetEventHandle, []string{"cuIpcGetEventHandle"}},
		{&a.cuIpcOpenEventHandle, []string{"cuIpcOpenEventHandle"}},
		{&a.cuMemcpyDtoHAsync, []string{"cuMemcpyDtoHAsync_v2"}},
		{&a.cuMemsetD8Async, []string{"cuMemsetD8Async"}},
	}
}

// optionalBindings are entry points a driver may lack without the backend being unusable.
func (a *api) optionalBindings() []binding {
	return []binding{
		{&a.cuDeviceGetDevResource, []string{"cuDeviceGetDevResource"}},
		{&a.cuDevSmResourceSplitByCount, []string{"cuDevSmResourceSplitByCount"}},
		{&a.cuDevResourceGenerateDesc, []string{"cuDevResourceGenerateDesc"}},
		{&a.cuGreenCtxCreate, []string{"cuGreenCtxCreate"}},
		{&a.cuCtxFromGreenCtx, []string{"cuCtxFromGreenCtx"}},
		{&a.cuGreenCtxStreamCreate, []string{"cuGreenCtxStreamCreate"}},
		{&a.cuGreenCtxGetDevResource, []string{"cuGreenCtxGetDevResource"}},
		{&a.cuOccupancyMaxActiveBlocksPerMultiprocessor, []string{"cuOccupancyMaxActiveBlocksPerMultiprocessor"}},
	}
}

// symbolLookup finds a symbol's address, 0 when absent. Tests replace it to check that a
// missing symbol becomes a coded error, not a panic.
type symbolLookup func(name string) uintptr

// bind resolves every binding through look. purego.RegisterLibFunc would panic on a missing
// symbol, so lookups happen first and all missing names are reported in one E_NO_DEVICE error.
func (a *api) bind(lib string, look symbolLookup, register func(fn any, addr uintptr)) error {
	var missing []string
	for _, b := range a.bindings() {
		var addr uintptr
		for _, n := range b.names {
			if addr = look(n); addr != 0 {
				break
			}
		}
		if addr == 0 {
			missing = append(missing, strings.Join(b.names, "|"))
			continue
		}
		register(b.fn, addr)
	}
	if len(missing) > 0 {
		return errs.New(errs.NoDevice, "NVIDIA driver %s lacks symbols %s (driver too old?)", lib, strings.Join(missing, ", "))
	}
	for _, b := range a.optionalBindings() {
		for _, n := range b.names {
			if addr := look(n); addr != 0 {
				register(b.fn, addr)
				break
			}
		}
	}
	return nil
}

// libcudaName is the driver's soname; the unversioned libcuda.so exists only with the toolkit.
const libcudaName = "libcuda.so.1"

var (
	driverOnce sync.Once
	driverAPI  *api
	driverErr  error
)

// loadDriver dlopens the driver once per process. RTLD_GLOBAL because libcuda loads helper
// libraries (the PTX JIT) that expect its symbols to be visible.
func loadDriver() (*api, error) {
	driverOnce.Do(func() {
		h, err := purego.Dlopen(libcudaName, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			driverErr = errs.New(errs.NoDevice, "no NVIDIA driver: cannot load %s (%v)", libcudaName, err)
			return
		}
		a := &api{}
		look := func(name string) uintptr {
			addr, err := purego.Dlsym(h, name)
			if err != nil {
				return 0
			}
			return addr
		}
		if err := a.bind(libcudaName, look, purego.RegisterFunc); err != nil {
			driverErr = err
			return
		}
		driverAPI = a
	})
	return driverAPI, driverErr
}

// goString copies a NUL-terminated C string owned by the driver.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}
