package mig

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// A recorded NVML session (testdata/nvml/*.json): what each call discovery makes answered on
// one node. A MIG index missing from "mig" answers NOT_FOUND, as an unused slot does.
type nvmlRecord struct {
	Devices []struct {
		Name        string `json:"name"`
		UUID        string `json:"uuid"`
		MemoryTotal uint64 `json:"memory_total"`
		MIGMode     struct {
			RC      int32  `json:"rc"`
			Current uint32 `json:"current"`
			Pending uint32 `json:"pending"`
		} `json:"mig_mode"`
		MaxMIG uint32 `json:"max_mig"`
		MIG    []struct {
			Index           uint32 `json:"index"`
			UUID            string `json:"uuid"`
			GPUInstance     uint32 `json:"gpu_instance"`
			ComputeInstance uint32 `json:"compute_instance"`
			Attributes      struct {
				SMs      uint32 `json:"sms"`
				GISlices uint32 `json:"gi_slices"`
				CISlices uint32 `json:"ci_slices"`
				MemoryMB uint64 `json:"memory_mb"`
			} `json:"attributes"`
			MemoryTotal uint64 `json:"memory_total"`
		} `json:"mig"`
	} `json:"devices"`
}

const (
	nvmlErrInvalidArgument = 2
	nvmlErrInsufficient    = 7
)

// replay builds an nvml whose functions answer from the record. Handles are GPU i+1 times
// 1000, its MIG device k that plus k+1: opaque numbers, as NVML's are to discovery.
func replay(t *testing.T, name string) *nvml {
	t.Helper()
	b, err := os.ReadFile("testdata/nvml/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var rec nvmlRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	type migRec = struct {
		uuid   string
		gi, ci uint32
		attrs  nvmlAttributes
		mem    uint64
	}
	gpus := map[uintptr]int{}
	migs := map[uintptr]migRec{}
	for i, d := range rec.Devices {
		h := uintptr(i+1) * 1000
		gpus[h] = i
		for _, m := range d.MIG {
			migs[h+uintptr(m.Index)+1] = migRec{m.UUID, m.GPUInstance, m.ComputeInstance, nvmlAttributes{
				MultiprocessorCount: m.Attributes.SMs, GPUInstanceSliceCount: m.Attributes.GISlices,
				ComputeInstanceSliceCount: m.Attributes.CISlices, MemorySizeMB: m.Attributes.MemoryMB}, m.MemoryTotal}
		}
	}
	str := func(s string, buf *byte, n uint32) int32 {
		if uint32(len(s)) >= n {
			return nvmlErrInsufficient
		}
		dst := unsafeBytes(buf, n)
		copy(dst, s)
		dst[len(s)] = 0
		return nvmlSuccess
	}
	gpu := func(h uintptr) (int, bool) { i, ok := gpus[h]; return i, ok }
	return &nvml{
		count: func(n *uint32) int32 { *n = uint32(len(rec.Devices)); return nvmlSuccess },
		byIndex: func(i uint32, dev *uintptr) int32 {
			if int(i) >= len(rec.Devices) {
				return nvmlErrInvalidArgument
			}
			*dev = uintptr(i+1) * 1000
			return nvmlSuccess
		},
		name: func(dev uintptr, buf *byte, n uint32) int32 {
			if i, ok := gpu(dev); ok {
				return str(rec.Devices[i].Name, buf, n)
			}
			return nvmlErrInvalidArgument
		},
		uuid: func(dev uintptr, buf *byte, n uint32) int32 {
			if i, ok := gpu(dev); ok {
				return str(rec.Devices[i].UUID, buf, n)
			}
			if m, ok := migs[dev]; ok {
				return str(m.uuid, buf, n)
			}
			return nvmlErrInvalidArgument
		},
		memory: func(dev uintptr, mem *nvmlMemory) int32 {
			if i, ok := gpu(dev); ok {
				mem.Total = rec.Devices[i].MemoryTotal
				return nvmlSuccess
			}
			if m, ok := migs[dev]; ok {
				mem.Total = m.mem
				return nvmlSuccess
			}
			return nvmlErrInvalidArgument
		},
		migMode: func(dev uintptr, cur, pending *uint32) int32 {
			d := rec.Devices[gpus[dev]]
			if d.MIGMode.RC == nvmlSuccess {
				*cur, *pending = d.MIGMode.Current, d.MIGMode.Pending
			}
			return d.MIGMode.RC
		},
		maxMIG: func(dev uintptr, n *uint32) int32 { *n = rec.Devices[gpus[dev]].MaxMIG; return nvmlSuccess },
		migByIndex: func(dev uintptr, k uint32, md *uintptr) int32 {
			h := dev + uintptr(k) + 1
			if _, ok := migs[h]; !ok {
				return nvmlErrNotFound
			}
			*md = h
			return nvmlSuccess
		},
		gpuInstance:  func(md uintptr, id *uint32) int32 { *id = migs[md].gi; return nvmlSuccess },
		compInstance: func(md uintptr, id *uint32) int32 { *id = migs[md].ci; return nvmlSuccess },
		attributes:   func(md uintptr, a *nvmlAttributes) int32 { *a = migs[md].attrs; return nvmlSuccess },
	}
}

func unsafeBytes(p *byte, n uint32) []byte { return unsafe.Slice(p, n) }

func walked(t *testing.T, name string) []GPU {
	t.Helper()
	gpus, err := replay(t, name).walk()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return gpus
}

// The two discovery sources describe the same node the same way: every GPU's index, name and
// UUID, every partition's device index, profile and UUID; the MIG mode where nvidia-smi -L
// shows it (a GPU without MIG devices there is "unknown").
func TestNVMLAndNvidiaSMIAgreeOnOneNode(t *testing.T) {
	for _, c := range []struct{ nvml, smi string }{{"h100-mixed.json", "h100-mixed.txt"}, {"a100-7x1g.json", "a100-7x1g.txt"}} {
		fromNVML, fromSMI := walked(t, c.nvml), fixture(t, c.smi)
		if len(fromNVML) != len(fromSMI) {
			t.Fatalf("%s: %d GPUs, nvidia-smi %d", c.nvml, len(fromNVML), len(fromSMI))
		}
		for i, g := range fromNVML {
			s := fromSMI[i]
			if g.Index != s.Index || g.Name != s.Name || g.UUID != s.UUID || len(g.Partitions) != len(s.Partitions) {
				t.Fatalf("%s GPU %d: NVML %+v, nvidia-smi %+v", c.nvml, i, g, s)
			}
			if s.MIGMode != ModeUnknown && g.MIGMode != s.MIGMode {
				t.Errorf("%s GPU %d: MIG %s, nvidia-smi %s", c.nvml, i, g.MIGMode, s.MIGMode)
			}
			for k, p := range g.Partitions {
				q := s.Partitions[k]
				if p.Device != q.Device || p.Profile != q.Profile || p.UUID != q.UUID {
					t.Errorf("%s GPU %d partition %d: NVML %+v, nvidia-smi %+v", c.nvml, i, k, p, q)
				}
			}
		}
	}
}

// What only NVML knows reaches the partitions: instance ids, SMs, and the memory of the MIG
// device's own nvmlDeviceGetMemoryInfo; each partition becomes a target placed by its UUID.
func TestNVMLGivesInstancesSMsAndMemory(t *testing.T) {
	gpus := walked(t, "h100-mixed.json")
	type row struct {
		gi, ci, sms int
		mem         uint64
	}
	want := []row{{2, 0, 60, 42144366592}, {3, 0, 32, 21072183296}, {9, 0, 16, 10334765056}, {10, 0, 16, 10334765056}}
	var got []row
	for _, p := range gpus[0].Partitions {
		got = append(got, row{p.GPUInstance, p.ComputeInstance, p.SMs, p.MemoryBytes})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("partitions %+v, want %+v", got, want)
	}
	if gpus[0].MIGMode != ModeEnabled || gpus[1].MIGMode != ModeDisabled || gpus[1].MemoryBytes != 85520809984 || len(gpus[1].Partitions) != 0 {
		t.Errorf("GPUs %+v", gpus)
	}
	var visible []string
	for _, tg := range Targets(gpus) {
		visible = append(visible, tg.Kind+" "+tg.Visible)
	}
	wantVisible := []string{"mig MIG-9f1d2c3b-4a5e-5f60-8172-93a4b5c6d7e8", "mig MIG-0a1b2c3d-4e5f-5a6b-9c7d-8e9f0a1b2c3d",
		"mig MIG-1b2c3d4e-5f6a-5b7c-8d9e-0f1a2b3c4d5e", "mig MIG-2c3d4e5f-6a7b-5c8d-9e0f-1a2b3c4d5e6f", "gpu GPU-7e8f9a0b-1c2d-4e3f-a5b6-c7d8e9f0a1b2"}
	if !reflect.DeepEqual(visible, wantVisible) {
		t.Errorf("targets %v, want %v", visible, wantVisible)
	}
}

// An unused MIG slot (NOT_FOUND) leaves no gap in the device numbers; two compute instances of
// one GPU instance are two devices with their own profile ("1c.2g.10gb"); a GPU without MIG is
// "unsupported" and offered whole.
func TestNVMLHolesSharedInstancesAndAGPUWithoutMIG(t *testing.T) {
	gpus := walked(t, "a100-shared-ci.json")
	var got []string
	for _, p := range gpus[0].Partitions {
		got = append(got, strings.Join([]string{itoa(p.Device), p.Profile, itoa(p.GPUInstance), itoa(p.ComputeInstance), itoa(p.SMs)}, " "))
	}
	want := []string{"0 3g.20gb 1 0 42", "1 1c.2g.10gb 6 0 14", "2 1c.2g.10gb 6 1 14"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("partitions %q, want %q", got, want)
	}
	if l4 := gpus[1]; l4.MIGMode != ModeUnsupported || len(l4.Partitions) != 0 || l4.Name != "NVIDIA L4" {
		t.Errorf("L4: %+v", l4)
	}
	ts := Targets(gpus)
	if len(ts) != 4 || ts[3].Kind != "gpu" || ts[3].Visible != "GPU-0c1d2e3f-4a5b-4c6d-8e7f-90a1b2c3d4e5" {
		t.Errorf("targets %+v", ts)
	}
}

// NVML failing where discovery cannot go on is E_NO_DEVICE naming the call or the GPU.
func TestNVMLFailuresAreCoded(t *testing.T) {
	n := replay(t, "h100-mixed.json")
	n.count = func(*uint32) int32 { return 999 }
	if _, err := n.walk(); errs.CodeOf(err) != errs.NoDevice || !strings.Contains(err.Error(), "nvmlDeviceGetCount_v2") {
		t.Errorf("count failing: %v", err)
	}
	n = replay(t, "h100-mixed.json")
	byIndex := n.byIndex
	n.byIndex = func(i uint32, dev *uintptr) int32 {
		if i == 1 {
			return 15 // NVML_ERROR_GPU_IS_LOST
		}
		return byIndex(i, dev)
	}
	if _, err := n.walk(); errs.CodeOf(err) != errs.NoDevice || !strings.Contains(err.Error(), "GPU 1") {
		t.Errorf("GPU 1 lost: %v", err)
	}
}
