package mig

import (
	"context"
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func fixture(t *testing.T, name string) []GPU {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := ParseSMI(string(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return gpus
}

func TestA100SevenSlices(t *testing.T) {
	gpus := fixture(t, "a100-7x1g.txt")
	if len(gpus) != 1 || gpus[0].Name != "NVIDIA A100-SXM4-40GB" || gpus[0].UUID != "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77" || gpus[0].MIGMode != ModeEnabled {
		t.Fatalf("%+v", gpus)
	}
	ps := gpus[0].Partitions
	if len(ps) != 7 {
		t.Fatalf("%d partitions", len(ps))
	}
	for i, p := range ps {
		if p.Device != i || p.Profile != "1g.5gb" || p.Slices() != 1 || !strings.HasPrefix(p.UUID, "MIG-") || p.GPUInstance != -1 {
			t.Errorf("partition %d: %+v", i, p)
		}
	}
	ts := Targets(gpus)
	if len(ts) != 7 || ts[6].Visible != "MIG-7df6b45c-a92d-5e09-8540-a6b389968c31" || ts[6].Kind != "mig" {
		t.Fatalf("targets: %+v", ts)
	}
}

func TestH100MixedProfilesAndAPlainGPU(t *testing.T) {
	gpus := fixture(t, "h100-mixed.txt")
	if len(gpus) != 2 {
		t.Fatalf("%+v", gpus)
	}
	var slices []int
	for _, p := range gpus[0].Partitions {
		slices = append(slices, p.Slices())
	}
	if !reflect.DeepEqual(slices, []int{3, 2, 1, 1}) {
		t.Errorf("slices %v", slices)
	}
	if gpus[1].MIGMode != ModeUnknown || len(gpus[1].Partitions) != 0 {
		t.Errorf("GPU 1: %+v", gpus[1])
	}
	ts := Targets(gpus)
	if len(ts) != 5 || ts[4].Kind != "gpu" || ts[4].Visible != gpus[1].UUID || ts[0].Name != "MIG 3g.40gb on NVIDIA H100 80GB HBM3" {
		t.Fatalf("targets: %+v", ts)
	}
}

func TestOldDriverUUIDsCarryInstanceIDs(t *testing.T) {
	gpus := fixture(t, "a100-r450.txt")
	ps := gpus[0].Partitions
	want := [][2]int{{1, 0}, {5, 0}, {6, 0}, {6, 1}}
	for i, p := range ps {
		if [2]int{p.GPUInstance, p.ComputeInstance} != want[i] {
			t.Errorf("partition %d: gi/ci %d/%d, want %v", i, p.GPUInstance, p.ComputeInstance, want[i])
		}
	}
	if ps[2].Profile != "1c.2g.10gb" || ps[2].Slices() != 2 {
		t.Errorf("compute-instance profile: %+v", ps[2])
	}
}

func TestNoMIG(t *testing.T) {
	gpus := fixture(t, "h100-no-mig.txt")
	ts := Targets(gpus)
	if len(gpus) != 1 || len(ts) != 1 || ts[0].Kind != "gpu" || ts[0].Name != "NVIDIA H100 80GB HBM3" {
		t.Fatalf("%+v %+v", gpus, ts)
	}
	// A GPU known to be in MIG mode with no instances offers no device.
	gpus[0].MIGMode = ModeEnabled
	if ts := Targets(gpus); len(ts) != 0 {
		t.Fatalf("MIG mode without instances gave targets %+v", ts)
	}
}

func TestParseErrorsAreCoded(t *testing.T) {
	for _, in := range []string{
		"No devices were found",
		"  MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef)",
		"GPU 0: X (UUID: GPU-1)\n  MIG bogus      Device  0: (UUID: MIG-c6d4f1ef)",
		"GPU 0: X (UUID: GPU-1)\n  MIG 1g.5gb Device 0: (UUID: MIG-a/b)",
		"GPU 99999999999999999999: X (UUID: GPU-1)",
	} {
		if _, err := ParseSMI(in); errs.CodeOf(err) != errs.Parse {
			t.Errorf("%q: %v, want E_PARSE", in, err)
		}
	}
	if gpus, err := ParseSMI("\n\r\n"); err != nil || len(gpus) != 0 {
		t.Errorf("blank: %v %v", gpus, err)
	}
}

func TestFormatRoundTripsFixtures(t *testing.T) {
	for _, f := range []string{"a100-7x1g.txt", "h100-mixed.txt", "a100-r450.txt", "h100-no-mig.txt"} {
		gpus := fixture(t, f)
		again, err := ParseSMI(FormatSMI(gpus))
		if err != nil || !reflect.DeepEqual(gpus, again) {
			t.Errorf("%s: %v\n%+v\n%+v", f, err, gpus, again)
		}
	}
}

func TestProfileNameFromAttributes(t *testing.T) {
	for _, c := range []struct {
		a    nvmlAttributes
		want string
	}{
		{nvmlAttributes{GPUInstanceSliceCount: 3, ComputeInstanceSliceCount: 3, MemorySizeMB: 40192}, "3g.40gb"},
		{nvmlAttributes{GPUInstanceSliceCount: 7, ComputeInstanceSliceCount: 7, MemorySizeMB: 81559}, "7g.80gb"},
		{nvmlAttributes{GPUInstanceSliceCount: 2, ComputeInstanceSliceCount: 1, MemorySizeMB: 9728}, "1c.2g.10gb"},
	} {
		if got := profileName(c.a); got != c.want {
			t.Errorf("%+v: %s, want %s", c.a, got, c.want)
		}
	}
}

// Here (no driver) Discover must say so with E_NO_DEVICE; with a driver it must list GPUs.
func TestDiscoverHere(t *testing.T) {
	gpus, src, err := Discover(context.Background())
	if err != nil {
		if errs.CodeOf(err) != errs.NoDevice {
			t.Fatalf("no driver but %v", err)
		}
		t.Skipf("no NVIDIA driver here: %v", err)
	}
	if len(gpus) == 0 || (src != SourceNVML && src != SourceSMI) {
		t.Fatalf("%s: %+v", src, gpus)
	}
	for _, g := range gpus {
		if !strings.HasPrefix(g.UUID, "GPU-") {
			t.Errorf("GPU %+v", g)
		}
	}
}

func FuzzParseSMI(f *testing.F) {
	for _, name := range []string{"a100-7x1g.txt", "h100-mixed.txt", "a100-r450.txt", "h100-no-mig.txt"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("GPU 0: X (UUID: GPU-1)\n  MIG 1g.5gb Device 0: (UUID: MIG-GPU-1/2/3)")
	f.Fuzz(func(t *testing.T, in string) {
		gpus, err := ParseSMI(in)
		if err != nil {
			if errs.CodeOf(err) != errs.Parse || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error not one E_PARSE line: %q", err)
			}
			return
		}
		for _, g := range gpus {
			if !strings.Contains(in, g.UUID) || !strings.HasPrefix(g.UUID, "GPU-") {
				t.Fatalf("GPU UUID %q not from the input", g.UUID)
			}
			for _, p := range g.Partitions {
				if !strings.Contains(in, p.UUID) || p.Slices() < 0 || g.MIGMode != ModeEnabled {
					t.Fatalf("partition %+v of %+v", p, g)
				}
			}
		}
		again, err := ParseSMI(FormatSMI(gpus))
		if err != nil || !reflect.DeepEqual(gpus, again) {
			t.Fatalf("format does not round-trip: %v\n%+v\n%+v", err, gpus, again)
		}
	})
}

// A GPU with MIG off and a known SM count offers its halves and quarters as SM partitions,
// placed with TESSERA_CUDA_SMS; MIG instances offer none.
func TestSMPartitionsOfAGPUWithoutMIG(t *testing.T) {
	gpus := []GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-1", MIGMode: ModeDisabled, SMs: 132, MemoryBytes: 80 << 30}}
	ts := Targets(gpus)
	if len(ts) != 3 || ts[0].Kind != "gpu" {
		t.Fatalf("targets: %+v", ts)
	}
	for i, want := range []struct{ sms, count int }{{64, 2}, {32, 4}} {
		s := ts[i+1]
		if s.Kind != "sm" || s.SMs != want.sms || s.Count != want.count || s.Env != fmt.Sprintf("TESSERA_CUDA_SMS=%d", want.sms) ||
			s.Visible != "GPU-1" || s.MemoryBytes != 0 {
			t.Errorf("SM partition %d: %+v", i, s)
		}
	}
	gpus[0].SMs = 12 // too few SMs for two groups of 8
	if ts := Targets(gpus); len(ts) != 1 {
		t.Fatalf("12 SMs gave SM partitions %+v", ts)
	}
}

// Whole GPUs get their SM count from the CUDA driver by UUID, whatever the ordinal.
func TestWithSMsMatchesByUUID(t *testing.T) {
	defer func(f func() ([]cuda.DeviceInfo, error)) { cudaDevices = f }(cudaDevices)
	cudaDevices = func() ([]cuda.DeviceInfo, error) {
		return []cuda.DeviceInfo{{Ordinal: 0, UUID: "GPU-b", SMs: 132}, {Ordinal: 1, UUID: "GPU-a", SMs: 114}}, nil
	}
	gpus := withSMs([]GPU{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}, {Index: 2, UUID: "GPU-c"}})
	if gpus[0].SMs != 114 || gpus[1].SMs != 132 || gpus[2].SMs != 0 {
		t.Fatalf("%+v", gpus)
	}
}
