package mig

import (
	"strings"
	"sync"

	"github.com/ebitengine/purego"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// The NVML calls discovery needs (nvml.h, driver R470+). Handles are opaque pointers.
type nvml struct {
	count        func(n *uint32) int32
	byIndex      func(i uint32, dev *uintptr) int32
	name         func(dev uintptr, buf *byte, n uint32) int32
	uuid         func(dev uintptr, buf *byte, n uint32) int32
	memory       func(dev uintptr, m *nvmlMemory) int32
	migMode      func(dev uintptr, current, pending *uint32) int32
	maxMIG       func(dev uintptr, n *uint32) int32
	migByIndex   func(dev uintptr, i uint32, mig *uintptr) int32
	gpuInstance  func(mig uintptr, id *uint32) int32
	compInstance func(mig uintptr, id *uint32) int32
	attributes   func(mig uintptr, a *nvmlAttributes) int32
}

// nvmlMemory is nvmlMemory_t.
type nvmlMemory struct{ Total, Free, Used uint64 }

// nvmlAttributes is nvmlDeviceAttributes_t (MIG device handles only).
type nvmlAttributes struct {
	MultiprocessorCount       uint32
	SharedCopyEngineCount     uint32
	SharedDecoderCount        uint32
	SharedEncoderCount        uint32
	SharedJpegCount           uint32
	SharedOfaCount            uint32
	GPUInstanceSliceCount     uint32
	ComputeInstanceSliceCount uint32
	MemorySizeMB              uint64
}

const (
	nvmlSuccess         = 0
	nvmlErrNotSupported = 3
	nvmlErrNotFound     = 6
)

var loadNVML = sync.OnceValues(func() (*nvml, error) {
	h, err := purego.Dlopen("libnvidia-ml.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, errs.New(errs.NoDevice, "NVML: libnvidia-ml.so.1 not found: %v", err)
	}
	n := &nvml{}
	var initFn func() int32
	for _, s := range []struct {
		fn   any
		name string
	}{
		{&initFn, "nvmlInit_v2"},
		{&n.count, "nvmlDeviceGetCount_v2"},
		{&n.byIndex, "nvmlDeviceGetHandleByIndex_v2"},
		{&n.name, "nvmlDeviceGetName"},
		{&n.uuid, "nvmlDeviceGetUUID"},
		{&n.memory, "nvmlDeviceGetMemoryInfo"},
		{&n.migMode, "nvmlDeviceGetMigMode"},
		{&n.maxMIG, "nvmlDeviceGetMaxMigDeviceCount"},
		{&n.migByIndex, "nvmlDeviceGetMigDeviceHandleByIndex"},
		{&n.gpuInstance, "nvmlDeviceGetGpuInstanceId"},
		{&n.compInstance, "nvmlDeviceGetComputeInstanceId"},
		{&n.attributes, "nvmlDeviceGetAttributes_v2"},
	} {
		addr, err := purego.Dlsym(h, s.name)
		if err != nil || addr == 0 {
			return nil, errs.New(errs.NoDevice, "NVML: %s missing (driver older than R470?)", s.name)
		}
		purego.RegisterFunc(s.fn, addr)
	}
	if rc := initFn(); rc != nvmlSuccess {
		return nil, errs.New(errs.NoDevice, "NVML: nvmlInit_v2 returned %d", rc)
	}
	return n, nil
})

func cstr(b []byte) string {
	s := string(b)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s
}

func (n *nvml) str(f func(uintptr, *byte, uint32) int32, dev uintptr) string {
	var buf [96]byte
	if f(dev, &buf[0], uint32(len(buf))) != nvmlSuccess {
		return ""
	}
	return cstr(buf[:])
}

// discoverNVML lists the GPUs and their MIG devices through NVML. It only reads.
func discoverNVML() ([]GPU, error) {
	n, err := loadNVML()
	if err != nil {
		return nil, err
	}
	return n.walk()
}

// walk asks n for every GPU and, where MIG is on, every MIG device: the whole of discovery's
// NVML logic, apart from loading the library, so that tests can replay recorded NVML answers
// (nvml_fixture_test.go).
func (n *nvml) walk() ([]GPU, error) {
	var count uint32
	if rc := n.count(&count); rc != nvmlSuccess {
		return nil, errs.New(errs.NoDevice, "NVML: nvmlDeviceGetCount_v2 returned %d", rc)
	}
	var gpus []GPU
	for i := range count {
		var dev uintptr
		if rc := n.byIndex(i, &dev); rc != nvmlSuccess {
			return nil, errs.New(errs.NoDevice, "NVML: GPU %d: handle: %d", i, rc)
		}
		g := GPU{Index: int(i), Name: n.str(n.name, dev), UUID: n.str(n.uuid, dev), MIGMode: ModeUnknown}
		var m nvmlMemory
		if n.memory(dev, &m) == nvmlSuccess {
			g.MemoryBytes = m.Total
		}
		var cur, pending uint32
		switch n.migMode(dev, &cur, &pending) {
		case nvmlSuccess:
			g.MIGMode = ModeDisabled
			if cur == 1 {
				g.MIGMode = ModeEnabled
			}
		case nvmlErrNotSupported:
			g.MIGMode = ModeUnsupported
		}
		if g.MIGMode == ModeEnabled {
			var max uint32
			n.maxMIG(dev, &max)
			for k := range max {
				var md uintptr
				if n.migByIndex(dev, k, &md) != nvmlSuccess {
					continue // NOT_FOUND: no MIG device at this index
				}
				p := Partition{Device: len(g.Partitions), UUID: n.str(n.uuid, md), GPUInstance: -1, ComputeInstance: -1}
				var id uint32
				if n.gpuInstance(md, &id) == nvmlSuccess {
					p.GPUInstance = int(id)
				}
				if n.compInstance(md, &id) == nvmlSuccess {
					p.ComputeInstance = int(id)
				}
				var a nvmlAttributes
				if n.attributes(md, &a) == nvmlSuccess {
					p.SMs, p.MemoryBytes = int(a.MultiprocessorCount), a.MemorySizeMB<<20
					p.Profile = profileName(a)
				}
				if n.memory(md, &m) == nvmlSuccess {
					p.MemoryBytes = m.Total
				}
				g.Partitions = append(g.Partitions, p)
			}
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// profileName rebuilds the profile name from a MIG device's attributes, as nvidia-smi names
// it: "3g.40gb", or "1c.3g.40gb" when the compute instance has fewer slices than its GPU
// instance. Memory is rounded up to whole GB, as NVIDIA rounds in its profile names (a 3g.40gb
// instance of an H100 has about 40192 MiB); a profile name is a label, the byte count is exact.
func profileName(a nvmlAttributes) string {
	gb := (a.MemorySizeMB + 1023) / 1024
	s := ""
	if a.ComputeInstanceSliceCount != 0 && a.ComputeInstanceSliceCount != a.GPUInstanceSliceCount {
		s = itoa(int(a.ComputeInstanceSliceCount)) + "c."
	}
	return s + itoa(int(a.GPUInstanceSliceCount)) + "g." + itoa(int(gb)) + "gb"
}
