package doctor

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// ThresholdsFormat and ThresholdsVersion name the thresholds file's format.
const (
	ThresholdsFormat  = "tessera.doctor.thresholds"
	ThresholdsVersion = 1
)

//go:embed thresholds.json
var embeddedThresholds []byte

// SKU holds one kind of device's limits. A limit of 0 means "not judged" (the check is
// skipped naming the SKU), so a file can leave out what a part does not have.
type SKU struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // "gpu" or "cpu"
	// Match: substrings of the device name (NVML's, or the CPU backend's "cpu ...") that
	// select this SKU; the first SKU with a matching substring wins.
	Match []string `json:"match"`

	PCIeMinGen           float64 `json:"pcie_min_gen"`
	PCIeMinWidth         float64 `json:"pcie_min_width"`
	PCIeReplayFail       float64 `json:"pcie_replay_fail"`
	PCIeReplayFailStress float64 `json:"pcie_replay_fail_stress"`
	TemperatureWarnC     float64 `json:"temperature_warn_c"`
	TemperatureFailC     float64 `json:"temperature_fail_c"`
	ECCSBEVolatileWarn   float64 `json:"ecc_sbe_volatile_warn"`
	RetiredPagesFail     float64 `json:"retired_pages_fail"`
	NVLinkErrorsWarn     float64 `json:"nvlink_errors_warn"`
	NVLinkErrorsFail     float64 `json:"nvlink_errors_fail"`
	// MemtestFraction of free device memory, or MemtestBytes when set (the CPU's).
	MemtestFraction   float64 `json:"memtest_fraction"`
	MemtestBytes      float64 `json:"memtest_bytes"`
	MemtestPasses     float64 `json:"memtest_passes"`
	MemtestPassesLong float64 `json:"memtest_passes_long"`
	H2DMinGBps        float64 `json:"h2d_min_gbps"`
	D2HMinGBps        float64 `json:"d2h_min_gbps"`
	D2DMinGBps        float64 `json:"d2d_min_gbps"`
	GEMMMinTFLOPS     float64 `json:"gemm_min_tflops"`
	BurnSeconds       float64 `json:"burn_seconds"`
	SoakSeconds       float64 `json:"soak_seconds"`
}

// Thresholds is the whole file.
type Thresholds struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	About   string `json:"about"`
	SKUs    []SKU  `json:"skus"`
	// Source is where it came from ("embedded" or a path); not part of the file.
	Source string `json:"-"`
}

// DefaultThresholds is the embedded file.
func DefaultThresholds() Thresholds {
	t, err := ParseThresholds(embeddedThresholds)
	if err != nil {
		panic("doctor: embedded thresholds.json: " + err.Error()) // TestEmbeddedThresholdsParse
	}
	t.Source = "embedded"
	return t
}

// LoadThresholds reads a user's file (E_INPUT naming the file and the field).
func LoadThresholds(path string) (Thresholds, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Thresholds{}, errs.New(errs.Input, "thresholds %s: %v", path, err)
	}
	t, err := ParseThresholds(b)
	if err != nil {
		return Thresholds{}, errs.New(errs.Input, "thresholds %s: %s", path, errs.Message(err))
	}
	t.Source = path
	return t, nil
}

// ParseThresholds reads a thresholds file strictly: unknown fields, a wrong format or
// version, a SKU without a name, kind or match, a duplicate name, a limit that is negative
// or not finite, a fraction above 1, a warning limit above its failing one, trailing data:
// each is E_INPUT naming the field.
func ParseThresholds(b []byte) (Thresholds, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var t Thresholds
	if err := dec.Decode(&t); err != nil {
		return Thresholds{}, errs.New(errs.Input, "%v", err)
	}
	if dec.More() {
		return Thresholds{}, errs.New(errs.Input, "data after the thresholds object")
	}
	if t.Format != ThresholdsFormat {
		return Thresholds{}, errs.New(errs.Input, "format %q, want %q", t.Format, ThresholdsFormat)
	}
	if t.Version != ThresholdsVersion {
		return Thresholds{}, errs.New(errs.Input, "version %d, this build reads %d", t.Version, ThresholdsVersion)
	}
	if len(t.SKUs) == 0 {
		return Thresholds{}, errs.New(errs.Input, "no skus")
	}
	seen := map[string]bool{}
	for i, s := range t.SKUs {
		where := fmt.Sprintf("skus[%d]", i)
		if strings.TrimSpace(s.Name) == "" {
			return Thresholds{}, errs.New(errs.Input, "%s: no name", where)
		}
		where += " (" + s.Name + ")"
		if seen[s.Name] {
			return Thresholds{}, errs.New(errs.Input, "%s: name given twice", where)
		}
		seen[s.Name] = true
		if s.Kind != "gpu" && s.Kind != "cpu" {
			return Thresholds{}, errs.New(errs.Input, "%s: kind %q, want gpu or cpu", where, s.Kind)
		}
		if len(s.Match) == 0 {
			return Thresholds{}, errs.New(errs.Input, "%s: no match", where)
		}
		for _, m := range s.Match {
			if strings.TrimSpace(m) == "" {
				return Thresholds{}, errs.New(errs.Input, "%s: empty match", where)
			}
		}
		for name, v := range s.limits() {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return Thresholds{}, errs.New(errs.Input, "%s: %s = %v, want a finite number >= 0", where, name, v)
			}
		}
		if s.MemtestFraction > 1 {
			return Thresholds{}, errs.New(errs.Input, "%s: memtest_fraction %v above 1", where, s.MemtestFraction)
		}
		for _, p := range []struct {
			warn, fail string
			w, f       float64
		}{
			{"temperature_warn_c", "temperature_fail_c", s.TemperatureWarnC, s.TemperatureFailC},
			{"nvlink_errors_warn", "nvlink_errors_fail", s.NVLinkErrorsWarn, s.NVLinkErrorsFail},
			{"pcie_replay_fail", "pcie_replay_fail_stress", s.PCIeReplayFail, s.PCIeReplayFailStress},
		} {
			if p.f > 0 && p.w > p.f {
				return Thresholds{}, errs.New(errs.Input, "%s: %s %v above %s %v", where, p.warn, p.w, p.fail, p.f)
			}
		}
	}
	return t, nil
}

// limits lists every numeric limit by its JSON name.
func (s SKU) limits() map[string]float64 {
	return map[string]float64{
		"pcie_min_gen": s.PCIeMinGen, "pcie_min_width": s.PCIeMinWidth, "pcie_replay_fail": s.PCIeReplayFail,
		"pcie_replay_fail_stress": s.PCIeReplayFailStress, "temperature_warn_c": s.TemperatureWarnC,
		"temperature_fail_c": s.TemperatureFailC, "ecc_sbe_volatile_warn": s.ECCSBEVolatileWarn,
		"retired_pages_fail": s.RetiredPagesFail, "nvlink_errors_warn": s.NVLinkErrorsWarn,
		"nvlink_errors_fail": s.NVLinkErrorsFail, "memtest_fraction": s.MemtestFraction, "memtest_bytes": s.MemtestBytes,
		"memtest_passes": s.MemtestPasses, "memtest_passes_long": s.MemtestPassesLong, "h2d_min_gbps": s.H2DMinGBps,
		"d2h_min_gbps": s.D2HMinGBps, "d2d_min_gbps": s.D2DMinGBps, "gemm_min_tflops": s.GEMMMinTFLOPS,
		"burn_seconds": s.BurnSeconds, "soak_seconds": s.SoakSeconds,
	}
}

// SKUFor is the first SKU of kind whose match is in name.
func (t Thresholds) SKUFor(kind, name string) (SKU, bool) {
	for _, s := range t.SKUs {
		if s.Kind != kind {
			continue
		}
		for _, m := range s.Match {
			if strings.Contains(name, m) {
				return s, true
			}
		}
	}
	return SKU{}, false
}

// EmbeddedThresholds is the embedded file's text, to start a user's own from.
func EmbeddedThresholds() string { return string(embeddedThresholds) }
