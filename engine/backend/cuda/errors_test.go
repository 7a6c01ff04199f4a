package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func TestCodeOfMapsDriverResults(t *testing.T) {
	cases := []struct {
		r    cuResult
		want errs.Code
	}{
		{cudaErrorOutOfMemory, errs.OOM},
		{cudaErrorIllegalAddress, errs.IllegalAddress},
		{cudaErrorMisalignedAddress, errs.IllegalAddress},
		{cudaErrorInvalidAddrSpace, errs.IllegalAddress},
		{cudaErrorLaunchTimeout, errs.Timeout},
		{cudaErrorTimeout, errs.Timeout},
		{cudaErrorNoDevice, errs.NoDevice},
		{cudaErrorNotInitialized, errs.NoDevice},
		{cudaErrorInsufficientDrv, errs.NoDevice},
		{cudaErrorStubLibrary, errs.NoDevice},
		{cudaErrorSystemDrvMismatch, errs.NoDevice},
		{cudaErrorInvalidPTX, errs.Unsupported},
		{cudaErrorInvalidImage, errs.Unsupported},
		{cudaErrorNoBinaryForGPU, errs.Unsupported},
		{cudaErrorUnsupportedPTXVer, errs.Unsupported},
		{cudaErrorInvalidValue, errs.Internal},
		{cudaErrorInvalidContext, errs.Internal},
		{cudaErrorLaunchFailed, errs.Internal},
		{cudaErrorLaunchOutOfRes, errs.Internal},
		{cudaErrorUnknown, errs.Internal},
		{12345, errs.Internal},
	}
	for _, c := range cases {
		if got := codeOf(c.r); got != c.want {
			t.Errorf("codeOf(%d %s) = %s, want %s", c.r, resultNames[c.r], got, c.want)
		}
	}
}

func TestResultNamesMatchCudaH(t *testing.T) {
	// Spot checks against cuda.h, so a typo in a constant cannot hide behind its own name.
	want := map[cuResult]string{2: "CUDA_ERROR_OUT_OF_MEMORY", 35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
		100: "CUDA_ERROR_NO_DEVICE", 218: "CUDA_ERROR_INVALID_PTX", 700: "CUDA_ERROR_ILLEGAL_ADDRESS",
		702: "CUDA_ERROR_LAUNCH_TIMEOUT", 716: "CUDA_ERROR_MISALIGNED_ADDRESS", 719: "CUDA_ERROR_LAUNCH_FAILED"}
	for r, n := range want {
		if resultNames[r] != n {
			t.Errorf("resultNames[%d] = %q, want %q", r, resultNames[r], n)
		}
	}
}

func TestStickyFaults(t *testing.T) {
	for _, r := range []cuResult{cudaErrorIllegalAddress, cudaErrorMisalignedAddress, cudaErrorLaunchFailed, cudaErrorIllegalInstr} {
		if !sticky(r) {
			t.Errorf("%s should poison the context", resultNames[r])
		}
	}
	for _, r := range []cuResult{cudaErrorOutOfMemory, cudaErrorInvalidValue, cudaErrorInvalidPTX} {
		if sticky(r) {
			t.Errorf("%s should not poison the context", resultNames[r])
		}
	}
}

func TestCuErrorIsCodedOneLineAndKeepsResult(t *testing.T) {
	var a *api // no driver: names come from the built-in table
	err := a.cuError(cudaErrorIllegalAddress, "cuda:0 H100: kernel %s %s: cuStreamSynchronize", "add_0",
		shape{Grid: [3]int{4, 1, 1}, Threads: 128})
	if errs.CodeOf(err) != errs.IllegalAddress {
		t.Fatalf("code %s, want E_ILLEGAL_ADDRESS: %v", errs.CodeOf(err), err)
	}
	msg := err.Error()
	for _, want := range []string{"E_ILLEGAL_ADDRESS: ", "cuda:0 H100", "kernel add_0", "grid=(4,1,1) block=128 shared=0B", "CUDA_ERROR_ILLEGAL_ADDRESS"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("message spans lines: %q", msg)
	}
	var re *resultError
	if !errors.As(err, &re) || re.Result != cudaErrorIllegalAddress {
		t.Errorf("errors.As does not find the CUresult in %v", err)
	}
	if a.check(cudaSuccess, "x") != nil {
		t.Error("check(CUDA_SUCCESS) is not nil")
	}
	if got := a.describe(4242).Name; got != "CUresult 4242" {
		t.Errorf("unknown result named %q", got)
	}
}
