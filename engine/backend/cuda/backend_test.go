package cuda

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// TestUnavailableWithoutDriver runs where libcuda.so.1 cannot be loaded (CI, development
// machines): the backend must say why, in a coded error, from every entry point.
func TestUnavailableWithoutDriver(t *testing.T) {
	if _, err := loadDriver(); err == nil {
		t.Skip("an NVIDIA driver is installed here; the no-driver path is not reachable")
	}
	b := New(0)
	err := b.Available()
	if errs.CodeOf(err) != errs.NoDevice || !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Fatalf("Available() = %v, want E_NO_DEVICE naming libcuda.so.1", err)
	}
	if b.Device() != "none" || b.DeviceClass() != "cuda/none" || b.Driver() != "" {
		t.Errorf("Device %q DeviceClass %q Driver %q", b.Device(), b.DeviceClass(), b.Driver())
	}
	if _, err := b.Run(&compiler.Program{}, nil); errs.CodeOf(err) != errs.NoDevice {
		t.Errorf("Run = %v, want E_NO_DEVICE", err)
	}
	if _, err := b.Time(&compiler.Program{}, -1, nil, 3); errs.CodeOf(err) != errs.NoDevice {
		t.Errorf("Time = %v, want E_NO_DEVICE", err)
	}
	if _, err := b.Stats(); errs.CodeOf(err) != errs.NoDevice {
		t.Errorf("Stats = %v, want E_NO_DEVICE", err)
	}
	if _, err := Devices(); errs.CodeOf(err) != errs.NoDevice {
		t.Errorf("Devices = %v, want E_NO_DEVICE", err)
	}
}

func TestDisabledByEnvironment(t *testing.T) {
	t.Setenv("TESSERA_CUDA_DISABLE", "1")
	err := New(0).Available()
	if errs.CodeOf(err) != errs.NoDevice || !strings.Contains(err.Error(), "TESSERA_CUDA_DISABLE") {
		t.Fatalf("Available() = %v, want E_NO_DEVICE naming TESSERA_CUDA_DISABLE", err)
	}
}

func TestRegisteredAsCuda(t *testing.T) {
	b, err := backend.Get("cuda")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.(*Backend); !ok || b.Name() != "cuda" {
		t.Fatalf("registry holds %T named %q", b, b.Name())
	}
}

func TestDeviceInfoText(t *testing.T) {
	d := DeviceInfo{Name: "NVIDIA H100 80GB HBM3", CCMajor: 9, CCMinor: 0, SMs: 132, MIG: "disabled"}
	if got, want := d.String(), "NVIDIA H100 80GB HBM3 sm_90 (132 SMs)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	d.MIG = "instance"
	if !strings.HasSuffix(d.String(), "MIG instance") {
		t.Errorf("a MIG instance is not marked: %q", d.String())
	}
	u := [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8}
	if got, want := formatUUID(u, false), "GPU-12345678-9abc-def0-0102-030405060708"; got != want {
		t.Errorf("formatUUID = %q, want %q", got, want)
	}
	if got := formatUUID(u, true); !strings.HasPrefix(got, "MIG-") {
		t.Errorf("MIG uuid %q", got)
	}
}

func TestMIGState(t *testing.T) {
	cases := []struct {
		name, visible string
		ordinal       int
		want          string
	}{
		{"NVIDIA H100 80GB HBM3", "", 0, "unknown"},
		{"NVIDIA H100 80GB HBM3 MIG 1g.10gb", "", 0, "instance"},
		{"NVIDIA H100 80GB HBM3", "MIG-4f3c0a2e-1111-2222-3333-444455556666", 0, "instance"},
		{"NVIDIA H100 80GB HBM3", "0, MIG-4f3c0a2e-1111-2222-3333-444455556666", 1, "instance"},
		{"NVIDIA H100 80GB HBM3", "0, MIG-4f3c0a2e-1111-2222-3333-444455556666", 0, "unknown"},
		{"NVIDIA H100 80GB HBM3", "GPU-4f3c0a2e-1111-2222-3333-444455556666", 0, "unknown"},
	}
	for _, c := range cases {
		if got := migState(c.name, c.visible, c.ordinal); got != c.want {
			t.Errorf("migState(%q, %q, %d) = %q, want %q", c.name, c.visible, c.ordinal, got, c.want)
		}
	}
}

func TestTargetFor(t *testing.T) {
	if got := targetFor(DeviceInfo{CCMajor: 9}).Arch(); got != "sm_90a" {
		t.Errorf("H100 target %s, want sm_90a", got)
	}
	if got := targetFor(DeviceInfo{CCMajor: 10}).Arch(); got != "sm_90" {
		t.Errorf("sm_100 target %s, want plain sm_90 PTX (sm_90a runs only on 9.0)", got)
	}
}

func TestLaunchShapeValidation(t *testing.T) {
	info := DeviceInfo{Ordinal: 0, Name: "H100", MaxThreads: 1024, MaxSharedOptIn: 232448}
	ok := shape{Grid: [3]int{1 << 20, 2, 3}, Threads: 256, Shared: 100 << 10}
	if err := ok.validate(info, "k"); err != nil {
		t.Fatalf("valid shape rejected: %v", err)
	}
	for name, s := range map[string]shape{
		"empty grid":    {Grid: [3]int{0, 1, 1}, Threads: 32},
		"grid y":        {Grid: [3]int{1, 70000, 1}, Threads: 32},
		"threads":       {Grid: [3]int{1, 1, 1}, Threads: 2048},
		"no threads":    {Grid: [3]int{1, 1, 1}, Threads: 0},
		"shared memory": {Grid: [3]int{1, 1, 1}, Threads: 32, Shared: 300 << 10},
	} {
		err := s.validate(info, "softmax_0")
		if errs.CodeOf(err) != errs.Unsupported || !strings.Contains(err.Error(), "kernel softmax_0 "+s.String()) {
			t.Errorf("%s: %v, want E_UNSUPPORTED naming kernel and shape", name, err)
		}
	}
}

func TestCheckProgramRejectsParamsLargerThanBuffers(t *testing.T) {
	b := graph.NewBuilder("g")
	b.Output(b.Op("add", nil, b.Input("x", numerics.F32, 8, 33), b.Input("y", numerics.F32, 8, 33)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkProgram(p); err != nil {
		t.Fatalf("compiled program rejected: %v", err)
	}
	k := p.Kernels[0]
	k.Params[0].Len++
	if err := checkProgram(p); errs.CodeOf(err) != errs.Internal || !strings.Contains(err.Error(), k.Name) {
		t.Errorf("param longer than its buffer: %v", err)
	}
	k.Params[0].Len--
	k.Params[0].DType = numerics.F16
	if err := checkProgram(p); errs.CodeOf(err) != errs.Internal {
		t.Errorf("param dtype differs from buffer: %v", err)
	}
	k.Params[0].DType = numerics.F32
	k.Params[0].Buffer = len(p.Buffers)
	if err := checkProgram(p); errs.CodeOf(err) != errs.Internal {
		t.Errorf("param names a missing buffer: %v", err)
	}
}

// Ranks of a multi-GPU node spread over its GPUs by LOCAL_RANK; a named device wins; a
// one-GPU machine puts every rank on device 0.
func TestLocalOrdinal(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		ndev int
		want int
		code errs.Code
	}{
		{map[string]string{}, 8, 0, ""},
		{map[string]string{"LOCAL_RANK": "5"}, 8, 5, ""},
		{map[string]string{"LOCAL_RANK": "5"}, 4, 1, ""},
		{map[string]string{"LOCAL_RANK": "3"}, 1, 0, ""},
		{map[string]string{"LOCAL_RANK": "3", "TESSERA_CUDA_DEVICE": "2"}, 4, 2, ""},
		{map[string]string{"LOCAL_RANK": "x"}, 4, 0, errs.Input},
		{map[string]string{"TESSERA_CUDA_DEVICE": "-1"}, 4, 0, errs.Input},
	} {
		got, err := localOrdinal(func(k string) string { return c.env[k] }, c.ndev)
		if errs.CodeOf(err) != c.code || (err == nil && got != c.want) {
			t.Errorf("%v on %d devices: %d %v, want %d %s", c.env, c.ndev, got, err, c.want, c.code)
		}
	}
}
