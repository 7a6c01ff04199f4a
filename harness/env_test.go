package harness

import (
	"runtime"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/engine/version"
)

// stubBackend is a Backend whose Run is a function, for tests that need no real engine.
type stubBackend struct {
	name, device, class string
	unavailable         error
	run                 func(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error)
}

func (s *stubBackend) Name() string        { return s.name }
func (s *stubBackend) Available() error    { return s.unavailable }
func (s *stubBackend) Device() string      { return s.device }
func (s *stubBackend) DeviceClass() string { return s.class }
func (s *stubBackend) Run(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return s.run(p, in)
}

type driverStub struct{ stubBackend }

func (driverStub) Driver() string      { return "580.00" }
func (driverStub) Determinism() string { return "per-device-class" }

func TestCaptureEnv(t *testing.T) {
	e := CaptureEnv(nil)
	if e.EngineVersion != version.Version || e.GoVersion != runtime.Version() || e.OS != runtime.GOOS ||
		e.Arch != runtime.GOARCH || e.NumCPU < 1 || e.GOMAXPROCS < 1 || e.Commit == "" {
		t.Errorf("process fields: %+v", e)
	}
	if e.Backend != "" || e.Determinism != DeterminismUnknown {
		t.Errorf("no backend, yet %+v", e)
	}
	cpu := CaptureEnv(&stubBackend{name: "cpu", device: "cpu amd64 x2", class: "cpu/amd64"})
	if cpu.Backend != "cpu" || cpu.Device != "cpu amd64 x2" || cpu.DeviceClass != "cpu/amd64" || cpu.Determinism != DeterminismBitwise {
		t.Errorf("cpu env: %+v", cpu)
	}
	if other := CaptureEnv(&stubBackend{name: "other"}); other.Determinism != DeterminismUnknown {
		t.Errorf("a backend that says nothing is %q", other.Determinism)
	}
	gpu := CaptureEnv(&driverStub{stubBackend{name: "cuda"}})
	if gpu.Driver != "580.00" || gpu.Determinism != "per-device-class" {
		t.Errorf("optional reporters ignored: %+v", gpu)
	}
}
