package job

import (
	"github.com/tessera-qa/tessera-qa/engine/autotune"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// TuneClock picks the timer and device description for a backend: the CUDA backend's event
// timer and device attributes, the CPU backend's wall clock, or whatever a backend that
// implements autotune.Tunable offers.
func TuneClock(b backend.Backend) (autotune.Timer, autotune.Device, error) {
	if t, ok := b.(autotune.Tunable); ok {
		d, err := t.TuneDevice()
		return t, d, err
	}
	if cb, ok := b.(*cuda.Backend); ok {
		info, err := cb.Info()
		if err != nil {
			return nil, autotune.Device{}, err
		}
		// A MIG instance reports its own SM count, so it keys its own cache entries.
		return cb, autotune.Device{Arch: info.Arch(), SMCount: info.SMs, SharedPerBlock: info.MaxSharedOptIn, Name: info.String()}, nil
	}
	if b.Name() == "cpu" {
		return autotune.WallTimer{Name: "cpu", Runner: b, Warmup: 1}, autotune.CPUDevice(b.DeviceClass(), b.Device()), nil
	}
	return nil, autotune.Device{}, errs.New(errs.NoDevice, "backend %s on %s offers no kernel timer to tune with", b.Name(), b.Device())
}
