package cuda

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// CUresult values the backend distinguishes (cuda.h, CUDA 13).
const (
	cudaSuccess                = 0
	cudaErrorInvalidValue      = 1
	cudaErrorOutOfMemory       = 2
	cudaErrorNotInitialized    = 3
	cudaErrorDeinitialized     = 4
	cudaErrorStubLibrary       = 34
	cudaErrorInsufficientDrv   = 35
	cudaErrorDeviceUnavailable = 46
	cudaErrorNoDevice          = 100
	cudaErrorInvalidDevice     = 101
	cudaErrorInvalidImage      = 200
	cudaErrorInvalidContext    = 201
	cudaErrorNoBinaryForGPU    = 209
	cudaErrorInvalidPTX        = 218
	cudaErrorJITNotFound       = 221
	cudaErrorUnsupportedPTXVer = 222
	cudaErrorNotFound          = 500
	cudaErrorNotReady          = 600
	cudaErrorIllegalAddress    = 700
	cudaErrorLaunchOutOfRes    = 701
	cudaErrorLaunchTimeout     = 702
	cudaErrorHardwareStack     = 714
	cudaErrorIllegalInstr      = 715
	cudaErrorMisalignedAddress = 716
	cudaErrorInvalidAddrSpace  = 717
	cudaErrorInvalidPC         = 718
	cudaErrorLaunchFailed      = 719
	cudaErrorNotSupported      = 801
	cudaErrorSystemDrvMismatch = 803
	cudaErrorCompatNotSupp     = 804
	cudaErrorTimeout           = 909
	cudaErrorUnknown           = 999
)

// resultNames spells the codes above as cuda.h does, so messages read the same with or without
// a driver to ask (cuGetErrorName).
var resultNames = map[cuResult]string{
	cudaErrorInvalidValue:      "CUDA_ERROR_INVALID_VALUE",
	cudaErrorOutOfMemory:       "CUDA_ERROR_OUT_OF_MEMORY",
	cudaErrorNotInitialized:    "CUDA_ERROR_NOT_INITIALIZED",
	cudaErrorDeinitialized:     "CUDA_ERROR_DEINITIALIZED",
	cudaErrorStubLibrary:       "CUDA_ERROR_STUB_LIBRARY",
	cudaErrorInsufficientDrv:   "CUDA_ERROR_INSUFFICIENT_DRIVER",
	cudaErrorDeviceUnavailable: "CUDA_ERROR_DEVICE_UNAVAILABLE",
	cudaErrorNoDevice:          "CUDA_ERROR_NO_DEVICE",
	cudaErrorInvalidDevice:     "CUDA_ERROR_INVALID_DEVICE",
	cudaErrorInvalidImage:      "CUDA_ERROR_INVALID_IMAGE",
	cudaErrorInvalidContext:    "CUDA_ERROR_INVALID_CONTEXT",
	cudaErrorNoBinaryForGPU:    "CUDA_ERROR_NO_BINARY_FOR_GPU",
	cudaErrorInvalidPTX:        "CUDA_ERROR_INVALID_PTX",
	cudaErrorJITNotFound:       "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
	cudaErrorUnsupportedPTXVer: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	cudaErrorNotFound:          "CUDA_ERROR_NOT_FOUND",
	cudaErrorNotReady:          "CUDA_ERROR_NOT_READY",
	cudaErrorIllegalAddress:    "CUDA_ERROR_ILLEGAL_ADDRESS",
	cudaErrorLaunchOutOfRes:    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	cudaErrorLaunchTimeout:     "CUDA_ERROR_LAUNCH_TIMEOUT",
	cudaErrorHardwareStack:     "CUDA_ERROR_HARDWARE_STACK_ERROR",
	cudaErrorIllegalInstr:      "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	cudaErrorMisalignedAddress: "CUDA_ERROR_MISALIGNED_ADDRESS",
	cudaErrorInvalidAddrSpace:  "CUDA_ERROR_INVALID_ADDRESS_SPACE",
	cudaErrorInvalidPC:         "CUDA_ERROR_INVALID_PC",
	cudaErrorLaunchFailed:      "CUDA_ERROR_LAUNCH_FAILED",
	cudaErrorNotSupported:      "CUDA_ERROR_NOT_SUPPORTED",
	cudaErrorSystemDrvMismatch: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	cudaErrorCompatNotSupp:     "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	cudaErrorTimeout:           "CUDA_ERROR_TIMEOUT",
	cudaErrorUnknown:           "CUDA_ERROR_UNKNOWN",
}

// codeOf maps a CUresult to the stable code users see (design.md §9).
func codeOf(r cuResult) errs.Code {
	switch r {
	case cudaErrorOutOfMemory:
		return errs.OOM
	case cudaErrorIllegalAddress, cudaErrorMisalignedAddress, cudaErrorInvalidAddrSpace:
		return errs.IllegalAddress
	case cudaErrorLaunchTimeout, cudaErrorTimeout:
		return errs.Timeout
	case cudaErrorNoDevice, cudaErrorInvalidDevice, cudaErrorNotInitialized, cudaErrorDeinitialized,
		cudaErrorInsufficientDrv, cudaErrorStubLibrary, cudaErrorDeviceUnavailable,
		cudaErrorSystemDrvMismatch, cudaErrorCompatNotSupp:
		return errs.NoDevice
	case cudaErrorInvalidPTX, cudaErrorInvalidImage, cudaErrorNoBinaryForGPU,
		cudaErrorUnsupportedPTXVer, cudaErrorJITNotFound, cudaErrorNotSupported:
		return errs.Unsupported
	}
	return errs.Internal
}

// sticky reports whether r leaves the context unusable: after a fault inside a kernel every
// later call on the context returns the same error, until the process exits.
func sticky(r cuResult) bool {
	switch r {
	case cudaErrorIllegalAddress, cudaErrorMisalignedAddress, cudaErrorInvalidAddrSpace,
		cudaErrorHardwareStack, cudaErrorIllegalInstr, cudaErrorInvalidPC, cudaErrorLaunchFailed,
		cudaErrorLaunchTimeout:
		return true
	}
	return false
}

// resultError is a failed driver call; cuError wraps it in a coded error so that callers can
// still find the raw CUresult with errors.As.
type resultError struct {
	Result cuResult
	Name   string
	Desc   string
}

func (e *resultError) Error() string {
	if e.Desc == "" {
		return e.Name
	}
	return e.Name + " (" + e.Desc + ")"
}

// describe names r, asking the driver for its description when one is loaded.
func (a *api) describe(r cuResult) *resultError {
	e := &resultError{Result: r, Name: resultNames[r]}
	if a != nil && a.cuGetErrorName != nil {
		var n, d *byte
		if a.cuGetErrorName(r, &n) == cudaSuccess && e.Name == "" {
			e.Name = goString(n)
		}
		if a.cuGetErrorString(r, &d) == cudaSuccess {
			e.Desc = goString(d)
		}
	}
	if e.Name == "" {
		e.Name = fmt.Sprintf("CUresult %d", int32(r))
	}
	return e
}

// cuError builds the coded one-line error for a failed call: what was being done (format),
// then the driver's name for r.
func (a *api) cuError(r cuResult, format string, args ...any) error {
	re := a.describe(r)
	return &errs.Error{Code: codeOf(r), Msg: fmt.Sprintf(format, args...) + ": " + re.Error(), Err: re}
}

// check returns nil for CUDA_SUCCESS, else cuError.
func (a *api) check(r cuResult, format string, args ...any) error {
	if r == cudaSuccess {
		return nil
	}
	return a.cuError(r, format, args...)
}
