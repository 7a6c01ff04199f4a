package green

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

type cuResult int32

// resource is a CUdevResource; its layout and the flags below are written down once, in the
// CUDA backend (engine/backend/cuda/green.go), whose owners make green contexts too.
type resource = cuda.SMResource

const (
	resourceTypeSM     = cuda.ResourceTypeSM
	greenCtxDefaultStr = cuda.GreenDefaultStream
	streamNonBlocking  = cuda.StreamNonBlocking
)

// api is the part of the driver this package uses.
type api struct {
	cuInit               func(flags uint32) cuResult
	cuGetErrorName       func(r cuResult, s **byte) cuResult
	cuDeviceGetCount     func(n *int32) cuResult
	cuDeviceGet          func(dev *int32, ordinal int32) cuResult
	cuDeviceGetAttribute func(v *int32, attr int32, dev int32) cuResult
	cuCtxSetCurrent      func(ctx uintptr) cuResult
	cuMemAlloc           func(p *uint64, n uint64) cuResult
	cuMemFree            func(p uint64) cuResult
	cuMemcpyHtoD         func(dst uint64, src unsafe.Pointer, n uint64) cuResult
	cuMemcpyDtoH         func(dst unsafe.Pointer, src uint64, n uint64) cuResult
	cuModuleLoadDataEx   func(mod *uintptr, image unsafe.Pointer, n uint32, opts *int32, vals *uintptr) cuResult
	cuModuleGetFunction  func(fn *uintptr, mod uintptr, name string) cuResult
	cuModuleUnload       func(mod uintptr) cuResult
	cuLaunchKernel       func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra unsafe.Pointer) cuResult
	cuStreamSynchronize  func(s uintptr) cuResult
	cuStreamQuery        func(s uintptr) cuResult
	cuStreamDestroy      func(s uintptr) cuResult

	// Green contexts (CUDA 12.4+). Missing ones make Split fail with E_UNSUPPORTED.
	cuDeviceGetDevResource      func(dev int32, res *resource, typ int32) cuResult
	cuDevSmResourceSplitByCount func(result *resource, nbGroups *uint32, input *resource, remaining *resource, useFlags uint32, minCount uint32) cuResult
	cuDevResourceGenerateDesc   func(desc *uintptr, res *resource, n uint32) cuResult
	cuGreenCtxCreate            func(ctx *uintptr, desc uintptr, dev int32, flags uint32) cuResult
	cuGreenCtxDestroy           func(ctx uintptr) cuResult
	cuCtxFromGreenCtx           func(ctx *uintptr, g uintptr) cuResult
	cuGreenCtxStreamCreate      func(s *uintptr, g uintptr, flags uint32, priority int32) cuResult
	cuGreenCtxGetDevResource    func(g uintptr, res *resource, typ int32) cuResult
}

type binding struct {
	fn    any
	names []string
	green bool // part of the green-context API: missing means E_UNSUPPORTED, not E_NO_DEVICE
}

func (a *api) bindings() []binding {
	return []binding{
		{&a.cuInit, []string{"cuInit"}, false},
		{&a.cuGetErrorName, []string{"cuGetErrorName"}, false},
		{&a.cuDeviceGetCount, []string{"cuDeviceGetCount"}, false},
		{&a.cuDeviceGet, []string{"cuDeviceGet"}, false},
		{&a.cuDeviceGetAttribute, []string{"cuDeviceGetAttribute"}, false},
		{&a.cuCtxSetCurrent, []string{"cuCtxSetCurrent"}, false},
		{&a.cuMemAlloc, []string{"cuMemAlloc_v2"}, false},
		{&a.cuMemFree, []string{"cuMemFree_v2"}, false},
		{&a.cuMemcpyHtoD, []string{"cuMemcpyHtoD_v2"}, false},
		{&a.cuMemcpyDtoH, []string{"cuMemcpyDtoH_v2"}, false},
		{&a.cuModuleLoadDataEx, []string{"cuModuleLoadDataEx"}, false},
		{&a.cuModuleGetFunction, []string{"cuModuleGetFunction"}, false},
		{&a.cuModuleUnload, []string{"cuModuleUnload"}, false},
		{&a.cuLaunchKernel, []string{"cuLaunchKernel"}, false},
		{&a.cuStreamSynchronize, []string{"cuStreamSynchronize"}, false},
		{&a.cuStreamQuery, []string{"cuStreamQuery"}, false},
		{&a.cuStreamDestroy, []string{"cuStreamDestroy_v2"}, false},
		{&a.cuDeviceGetDevResource, []string{"cuDeviceGetDevResource"}, true},
		{&a.cuDevSmResourceSplitByCount, []string{"cuDevSmResourceSplitByCount"}, true},
		{&a.cuDevResourceGenerateDesc, []string{"cuDevResourceGenerateDesc"}, true},
		{&a.cuGreenCtxCreate, []string{"cuGreenCtxCreate"}, true},
		{&a.cuGreenCtxDestroy, []string{"cuGreenCtxDestroy"}, true},
		{&a.cuCtxFromGreenCtx, []string{"cuCtxFromGreenCtx"}, true},
		{&a.cuGreenCtxStreamCreate, []string{"cuGreenCtxStreamCreate"}, true},
		{&a.cuGreenCtxGetDevResource, []string{"cuGreenCtxGetDevResource"}, true},
	}
}

// bind resolves every binding through look (0: absent) before registering any, so a missing
// symbol is a coded error and never a purego panic: E_NO_DEVICE when a basic entry point is
// missing, E_UNSUPPORTED when only green-context ones are (a driver older than CUDA 12.4).
func (a *api) bind(lib string, look func(string) uintptr, register func(fn any, addr uintptr)) error {
	var basic, green []string
	addrs := make([]uintptr, len(a.bindings()))
	for i, b := range a.bindings() {
		for _, n := range b.names {
			if addrs[i] = look(n); addrs[i] != 0 {
				break
			}
		}
		if addrs[i] == 0 {
			if b.green {
				green = append(green, strings.Join(b.names, "|"))
			} else {
				basic = append(basic, strings.Join(b.names, "|"))
			}
		}
	}
	if len(basic) > 0 {
		return errs.New(errs.NoDevice, "green: NVIDIA driver %s lacks symbols %s", lib, strings.Join(basic, ", "))
	}
	if len(green) > 0 {
		return errs.New(errs.Unsupported, "green: NVIDIA driver %s has no green contexts (lacks %s; CUDA 12.4+ driver needed)", lib, strings.Join(green, ", "))
	}
	for i, b := range a.bindings() {
		register(b.fn, addrs[i])
	}
	return nil
}

// LibName is the driver's soname; tests point it elsewhere before the first Split.
var LibName = "libcuda.so.1"

var (
	loadOnce sync.Once
	loaded   *api
	loadErr  error
)

func load() (*api, error) {
	loadOnce.Do(func() {
		h, err := purego.Dlopen(LibName, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			loadErr = errs.New(errs.NoDevice, "green: no NVIDIA driver: cannot load %s (%v)", LibName, err)
			return
		}
		a := &api{}
		look := func(n string) uintptr {
			p, err := purego.Dlsym(h, n)
			if err != nil {
				return 0
			}
			return p
		}
		if err := a.bind(LibName, look, purego.RegisterFunc); err != nil {
			loadErr = err
			return
		}
		if r := a.cuInit(0); r != 0 {
			loadErr = a.cuError(r, "green: cuInit")
			return
		}
		loaded = a
	})
	return loaded, loadErr
}

// codeOf maps a CUresult to the project's error codes.
func codeOf(r cuResult) errs.Code {
	switch r {
	case 2: // OUT_OF_MEMORY
		return errs.OOM
	case 3, 4, 34, 35, 46, 100, 101, 803, 804: // not initialised, stub, insufficient driver, no/invalid device
		return errs.NoDevice
	case 700, 716, 717, 718, 719, 714, 715: // illegal address and the other sticky faults
		return errs.IllegalAddress
	case 801: // NOT_SUPPORTED
		return errs.Unsupported
	case 702, 909:
		return errs.Timeout
	}
	return errs.Internal
}

func (a *api) cuError(r cuResult, format string, args ...any) error {
	name := fmt.Sprintf("CUresult %d", int32(r))
	if a != nil && a.cuGetErrorName != nil {
		var p *byte
		if a.cuGetErrorName(r, &p) == 0 && p != nil {
			name = goString(p)
		}
	}
	return errs.New(codeOf(r), "%s: %s", fmt.Sprintf(format, args...), name)
}

func (a *api) check(r cuResult, format string, args ...any) error {
	if r == 0 {
		return nil
	}
	return a.cuError(r, format, args...)
}

func goString(p *byte) string {
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}
