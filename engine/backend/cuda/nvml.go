package cuda

import (
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// nvml is the sliver of NVML (libnvidia-ml.so.1, installed with every driver) that answers
// what the CUDA driver API cannot: the driver's release number ("580.65.06") and whether MIG
// is enabled on a GPU. NVML is optional: without it those fields read "unknown".
type nvml struct {
	getDriverVersion func(buf *byte, n uint32) int32
	handleByUUID     func(uuid string, dev *uintptr) int32
	getMigMode       func(dev uintptr, current, pending *uint32) int32
}

const (
	nvmlSuccess         = 0
	nvmlErrNotSupported = 3
)

var nvmlLib = sync.OnceValue(func() *nvml {
	h, err := purego.Dlopen("libnvidia-ml.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil
	}
	n := &nvml{}
	var nvmlInit func() int32
	syms := []struct {
		fn   any
		name string
	}{
		{&nvmlInit, "nvmlInit_v2"},
		{&n.getDriverVersion, "nvmlSystemGetDriverVersion"},
		{&n.handleByUUID, "nvmlDeviceGetHandleByUUID"},
		{&n.getMigMode, "nvmlDeviceGetMigMode"},
	}
	for _, s := range syms {
		addr, err := purego.Dlsym(h, s.name)
		if err != nil || addr == 0 {
			return nil
		}
		purego.RegisterFunc(s.fn, addr)
	}
	if nvmlInit() != nvmlSuccess {
		return nil
	}
	return n
})

// nvmlDriverVersion is the driver release, or "" without NVML.
func nvmlDriverVersion() string {
	n := nvmlLib()
	if n == nil {
		return ""
	}
	var buf [96]byte
	if n.getDriverVersion(&buf[0], uint32(len(buf))) != nvmlSuccess {
		return ""
	}
	s := string(buf[:])
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s
}

// nvmlMIGMode reports the current MIG mode of the GPU with this UUID: "enabled", "disabled",
// "unsupported" (the GPU has no MIG) or "unknown" (no NVML, or NVML does not know the UUID).
func nvmlMIGMode(uuid string) string {
	n := nvmlLib()
	if n == nil {
		return "unknown"
	}
	var dev uintptr
	if n.handleByUUID(uuid, &dev) != nvmlSuccess {
		return "unknown"
	}
	var cur, pending uint32
	switch n.getMigMode(dev, &cur, &pending) {
	case nvmlSuccess:
		if cur == 1 {
			return "enabled"
		}
		return "disabled"
	case nvmlErrNotSupported:
		return "unsupported"
	}
	return "unknown"
}
