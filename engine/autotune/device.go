package autotune

import (
	"fmt"
	"runtime"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Device describes the machine configs are tuned for. Arch and SMCount are the cache's device
// key: two GPUs with the same architecture and SM count pick the same configs; any other
// device gets entries of its own.
type Device struct {
	// Arch is the compute architecture ("sm_90"), or a CPU backend's device class
	// ("cpu/amd64+fma").
	Arch string `json:"arch"`
	// SMCount is the number of streaming multiprocessors (the CPU: logical cores).
	SMCount int `json:"sm_count"`
	// SharedPerBlock is the shared memory one CTA may use, in bytes (the opt-in maximum,
	// 232448 on an H100). 0 means there is no shared memory to budget (the CPU backend):
	// then no shared-memory filter applies and pipeline stages are not tuned, since nothing
	// reads them.
	SharedPerBlock int `json:"shared_per_block"`
	// Name is for people ("NVIDIA H100 80GB HBM3"); it is not part of the key.
	Name string `json:"name,omitempty"`
}

// Key is the device part of every cache key: "sm_90/sm132".
func (d Device) Key() string { return fmt.Sprintf("%s/sm%d", d.Arch, d.SMCount) }

// Validate reports a device description that cannot key a cache or filter a space.
func (d Device) Validate() error {
	switch {
	case d.Arch == "":
		return errs.New(errs.Input, "autotune device %q: empty arch", d.Name)
	case d.SMCount < 1:
		return errs.New(errs.Input, "autotune device %s (%s): SM count %d < 1", d.Arch, d.Name, d.SMCount)
	case d.SharedPerBlock < 0:
		return errs.New(errs.Input, "autotune device %s (%s): negative shared memory per block %d", d.Arch, d.Name, d.SharedPerBlock)
	}
	return nil
}

// pipelined reports whether the device runs software pipelines, so that stages matter.
func (d Device) pipelined() bool { return d.SharedPerBlock > 0 }

// CPUDevice describes the host for the CPU backend: its device class as the arch (the same
// class is what promises the same bits) and its logical cores as the SM count.
func CPUDevice(class, name string) Device {
	return Device{Arch: class, SMCount: runtime.NumCPU(), Name: name}
}

// Tunable is what a backend implements to be tuned on its own device with its own clock:
// the CUDA backend times kernels with CUDA events and reads the device's attributes.
type Tunable interface {
	Timer
	TuneDevice() (Device, error)
}
