package cuda

import (
	"fmt"
	"os"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// CUdevice_attribute values read at discovery (cuda.h).
const (
	attrMaxThreadsPerBlock     = 1
	attrMaxSharedPerBlock      = 8
	attrMultiprocessorCount    = 16
	attrECCEnabled             = 32
	attrPCIBusID               = 33
	attrPCIDeviceID            = 34
	attrL2CacheSize            = 38
	attrPCIDomainID            = 50
	attrComputeCapMajor        = 75
	attrComputeCapMinor        = 76
	attrMaxSharedPerBlockOptIn = 97
	attrMaxThreadsPerSM        = 39
)

// DeviceInfo is what discovery learns about one CUDA device. MIG: the driver has no device
// attribute for MIG mode (CU_DEVICE_ATTRIBUTE_* stops at MPS_ENABLED). A MIG compute instance
// shows up as its own CUDA device whose name carries "MIG <profile>" and which
// CUDA_VISIBLE_DEVICES names by a "MIG-" UUID; the parent GPU's mode comes from NVML when
// libnvidia-ml.so.1 is present. MIG is "instance", "enabled", "disabled" or "unknown".
type DeviceInfo struct {
	Ordinal        int
	Name           string
	UUID           string // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", or "MIG-..." for an instance
	PCI            string // "0000:3b:00.0"
	CCMajor        int
	CCMinor        int
	SMs            int
	TotalMem       uint64
	L2Bytes        int
	MaxThreads     int
	MaxShared      int // default per-block shared memory (48 KiB)
	MaxSharedOptIn int // per-block shared memory a kernel can opt into (227 KiB on sm_90)
	MaxThreadsSM   int // resident threads per SM (2048 on sm_90); 0 when the driver did not say
	ECC            bool
	MIG            string
}

// Arch is the PTX target name, e.g. "sm_90".
func (d DeviceInfo) Arch() string { return fmt.Sprintf("sm_%d%d", d.CCMajor, d.CCMinor) }

// String is the Device() text: "NVIDIA H100 80GB HBM3 sm_90 (132 SMs)".
func (d DeviceInfo) String() string {
	s := fmt.Sprintf("%s %s (%d SMs)", d.Name, d.Arch(), d.SMs)
	if d.MIG == "instance" {
		s += " MIG instance"
	}
	return s
}

// driverVersion returns cuDriverGetVersion's value, e.g. 13000 for CUDA 13.0.
func driverVersion(a *api) (int, error) {
	var v int32
	if err := a.check(a.cuDriverGetVersion(&v), "cuDriverGetVersion"); err != nil {
		return 0, err
	}
	return int(v), nil
}

// Devices initialises the driver and describes every visible device. It fails with
// E_NO_DEVICE when there is no driver, the driver cannot initialise, or no device is visible.
func Devices() ([]DeviceInfo, error) {
	a, err := loadDriver()
	if err != nil {
		return nil, err
	}
	if err := initDriver(a); err != nil {
		return nil, err
	}
	var n int32
	if err := a.check(a.cuDeviceGetCount(&n), "cuDeviceGetCount"); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errs.New(errs.NoDevice, "NVIDIA driver loaded but no CUDA device is visible (CUDA_VISIBLE_DEVICES=%q)", os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	out := make([]DeviceInfo, 0, n)
	for i := range int(n) {
		d, err := describeDevice(a, i)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// initDriver calls cuInit(0). Repeated calls are cheap and return the first call's result.
func initDriver(a *api) error {
	return a.check(a.cuInit(0), "cuInit")
}

func describeDevice(a *api, ordinal int) (DeviceInfo, error) {
	d := DeviceInfo{Ordinal: ordinal}
	var dev int32
	if err := a.check(a.cuDeviceGet(&dev, int32(ordinal)), "cuDeviceGet(%d)", ordinal); err != nil {
		return d, err
	}
	var name [256]byte
	if err := a.check(a.cuDeviceGetName(&name[0], int32(len(name)), dev), "cuDeviceGetName(%d)", ordinal); err != nil {
		return d, err
	}
	d.Name = string(name[:])
	if i := strings.IndexByte(d.Name, 0); i >= 0 {
		d.Name = d.Name[:i]
	}
	if err := a.check(a.cuDeviceTotalMem(&d.TotalMem, dev), "cuDeviceTotalMem(%d)", ordinal); err != nil {
		return d, err
	}
	var uuid [16]byte
	if err := a.check(a.cuDeviceGetUuid(&uuid, dev), "cuDeviceGetUuid(%d)", ordinal); err != nil {
		return d, err
	}
	attrs := []struct {
		attr int32
		dst  *int
	}{
		{attrComputeCapMajor, &d.CCMajor}, {attrComputeCapMinor, &d.CCMinor},
		{attrMultiprocessorCount, &d.SMs}, {attrL2CacheSize, &d.L2Bytes},
		{attrMaxThreadsPerBlock, &d.MaxThreads}, {attrMaxSharedPerBlock, &d.MaxShared},
		{attrMaxSharedPerBlockOptIn, &d.MaxSharedOptIn},
	}
	for _, at := range attrs {
		var v int32
		if err := a.check(a.cuDeviceGetAttribute(&v, at.attr, dev), "cuDeviceGetAttribute(%d, attr %d)", ordinal, at.attr); err != nil {
			return d, err
		}
		*at.dst = int(v)
	}
	// Informational attributes: a driver that does not know them must not hide the device.
	var ecc, bus, pdev, dom, tsm int32
	if a.cuDeviceGetAttribute(&tsm, attrMaxThreadsPerSM, dev) == cudaSuccess {
		d.MaxThreadsSM = int(tsm)
	}
	if a.cuDeviceGetAttribute(&ecc, attrECCEnabled, dev) == cudaSuccess {
		d.ECC = ecc != 0
	}
	if a.cuDeviceGetAttribute(&bus, attrPCIBusID, dev) == cudaSuccess &&
		a.cuDeviceGetAttribute(&pdev, attrPCIDeviceID, dev) == cudaSuccess &&
		a.cuDeviceGetAttribute(&dom, attrPCIDomainID, dev) == cudaSuccess {
		d.PCI = fmt.Sprintf("%04x:%02x:%02x.0", dom, bus, pdev)
	}
	d.MIG = migState(d.Name, os.Getenv("CUDA_VISIBLE_DEVICES"), ordinal)
	d.UUID = formatUUID(uuid, d.MIG == "instance")
	if d.MIG == "unknown" {
		d.MIG = nvmlMIGMode(d.UUID)
	}
	return d, nil
}

// migState decides what can be decided without NVML: a device named "... MIG 1g.10gb" or
// selected through a "MIG-" entry of CUDA_VISIBLE_DEVICES is a MIG instance.
func migState(name, visible string, ordinal int) string {
	if strings.Contains(name, " MIG ") {
		return "instance"
	}
	if visible != "" {
		entries := strings.Split(visible, ",")
		if ordinal < len(entries) && strings.HasPrefix(strings.TrimSpace(entries[ordinal]), "MIG-") {
			return "instance"
		}
	}
	return "unknown"
}

// formatUUID spells the 16 UUID bytes the way nvidia-smi does.
func formatUUID(u [16]byte, mig bool) string {
	prefix := "GPU-"
	if mig {
		prefix = "MIG-"
	}
	h := fmt.Sprintf("%x", u[:])
	return fmt.Sprintf("%s%s-%s-%s-%s-%s", prefix, h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
}
