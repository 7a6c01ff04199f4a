package mig

import (
	"context"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Source says where a discovery came from.
const (
	SourceNVML = "nvml"
	SourceSMI  = "nvidia-smi"
)

// smiTimeout bounds `nvidia-smi -L` (a hung driver makes it hang).
const smiTimeout = 10 * time.Second

// Discover lists the GPUs through NVML, else by parsing `nvidia-smi -L`. E_NO_DEVICE when
// neither is there (no NVIDIA driver), naming both reasons.
func Discover(ctx context.Context) ([]GPU, string, error) {
	gpus, nerr := discoverNVML()
	if nerr == nil {
		return withSMs(gpus), SourceNVML, nil
	}
	out, serr := runSMI(ctx)
	if serr != nil {
		return nil, "", errs.New(errs.NoDevice, "no GPU discovery: %s; nvidia-smi -L: %v",
			strings.TrimPrefix(nerr.Error(), string(errs.NoDevice)+": "), serr)
	}
	gpus, err := ParseSMI(out)
	if err != nil {
		return nil, "", err
	}
	return withSMs(gpus), SourceSMI, nil
}

// cudaDevices is cuda.Devices; tests replace it.
var cudaDevices = cuda.Devices

// withSMs fills in the SM count of whole GPUs that discovery left unknown (NVML reports SMs
// only for MIG devices; nvidia-smi -L never does) from the CUDA driver, matched by UUID, since
// CUDA's ordinals need not follow NVML's indices. Without a driver they stay unknown.
func withSMs(gpus []GPU) []GPU {
	devs, err := cudaDevices()
	if err != nil {
		return gpus
	}
	for i := range gpus {
		for _, d := range devs {
			if gpus[i].SMs == 0 && d.UUID == gpus[i].UUID {
				gpus[i].SMs = d.SMs
			}
		}
	}
	return gpus
}

func runSMI(ctx context.Context) (string, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, smiTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-L")
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return "", errs.New(errs.Timeout, "nvidia-smi -L took more than %s", smiTimeout)
	}
	return string(out), err
}

func itoa(n int) string { return strconv.Itoa(n) }
