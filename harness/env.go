package harness

import (
	"os"
	"runtime"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/version"
)

// Determinism levels recorded in Env.Determinism.
const (
	// DeterminismBitwise: same inputs, program and device class give the same bits.
	DeterminismBitwise = "bitwise"
	// DeterminismUnknown: the backend makes no statement.
	DeterminismUnknown = "unknown"
)

// Env is where a result was produced: enough to tell whether two results may be compared
// bitwise (same engine version and device class) and to reproduce the run.
type Env struct {
	EngineVersion string `json:"engine_version"`
	Commit        string `json:"commit"`
	GoVersion     string `json:"go_version"`
	OS            string `json:"os"`
	Arch          string `json:"arch"`
	Backend       string `json:"backend"`
	Device        string `json:"device"`
	DeviceClass   string `json:"device_class"`
	Driver        string `json:"driver,omitempty"`
	GOMAXPROCS    int    `json:"gomaxprocs"`
	NumCPU        int    `json:"num_cpu"`
	Determinism   string `json:"determinism"`
	Hostname      string `json:"hostname"`
}

// A backend may implement these to add to its Env; the Backend contract does not require them.
type (
	driverReporter      interface{ Driver() string }
	determinismReporter interface{ Determinism() string }
)

// CaptureEnv describes this process and backend b (which may be nil, for results that ran no
// backend).
func CaptureEnv(b backend.Backend) Env {
	e := Env{
		EngineVersion: version.Version,
		Commit:        version.Commit(),
		GoVersion:     runtime.Version(),
		OS:            runtime.GOOS,
		Arch:          runtime.GOARCH,
		GOMAXPROCS:    runtime.GOMAXPROCS(0),
		NumCPU:        runtime.NumCPU(),
		Determinism:   DeterminismUnknown,
	}
	if h, err := os.Hostname(); err == nil {
		e.Hostname = h
	}
	if b == nil {
		return e
	}
	e.Backend, e.Device, e.DeviceClass = b.Name(), b.Device(), b.DeviceClass()
	if d, ok := b.(driverReporter); ok {
		e.Driver = d.Driver()
	}
	switch d, ok := b.(determinismReporter); {
	case ok:
		e.Determinism = d.Determinism()
	case b.Name() == "cpu":
		// The CPU backend runs Tile IR in a fixed order with no atomics (design.md §4).
		e.Determinism = DeterminismBitwise
	}
	return e
}
