package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Defaults of Thresholds (docs/reporter.md).
var DefaultThresholds = Thresholds{Warn: 0.05, Block: 0.20, MinEffect: 0.02, Alpha: 0.05, Window: 20, MinRuns: 3}

// Config is the reporter's configuration file (JSON):
//
//	{
//	  "baseline_branch": "main",
//	  "defaults": {"warn": 0.05, "block": 0.20},
//	  "benchmarks": [
//	    {"benchmark": "flash_attention*", "device": "cuda/*", "warn": 0.08, "block": 0.30}
//	  ]
//	}
//
// Per-benchmark rules match their non-empty fields as path.Match globs; the first matching
// rule wins; fields a rule leaves out come from defaults.
type Config struct {
	// BaselineBranch: runs on this branch form the baseline windows of the views ("main").
	BaselineBranch string          `json:"baseline_branch,omitempty"`
	Defaults       ThresholdsPatch `json:"defaults"`
	Benchmarks     []BenchmarkRule `json:"benchmarks,omitempty"`
}

// ThresholdsPatch overrides the fields it sets.
type ThresholdsPatch struct {
	Warn      *float64 `json:"warn,omitempty"`
	Block     *float64 `json:"block,omitempty"`
	MinEffect *float64 `json:"min_effect,omitempty"`
	Alpha     *float64 `json:"alpha,omitempty"`
	Window    *int     `json:"window,omitempty"`
	MinRuns   *int     `json:"min_runs,omitempty"`
}

// BenchmarkRule sets thresholds for the series it matches.
type BenchmarkRule struct {
	Benchmark string `json:"benchmark,omitempty"`
	Device    string `json:"device,omitempty"`
	DType     string `json:"dtype,omitempty"`
	Shape     string `json:"shape,omitempty"`
	ThresholdsPatch
}

func (p ThresholdsPatch) apply(t Thresholds) Thresholds {
	if p.Warn != nil {
		t.Warn = *p.Warn
	}
	if p.Block != nil {
		t.Block = *p.Block
	}
	if p.MinEffect != nil {
		t.MinEffect = *p.MinEffect
	}
	if p.Alpha != nil {
		t.Alpha = *p.Alpha
	}
	if p.Window != nil {
		t.Window = *p.Window
	}
	if p.MinRuns != nil {
		t.MinRuns = *p.MinRuns
	}
	return t
}

func (c Config) withDefaults() Config {
	if c.BaselineBranch == "" {
		c.BaselineBranch = "main"
	}
	return c
}

// ThresholdsFor returns the thresholds in force for series k.
func (c Config) ThresholdsFor(k SeriesKey) Thresholds {
	t := c.Defaults.apply(DefaultThresholds)
	for _, r := range c.Benchmarks {
		if globOK(r.Benchmark, k.Benchmark) && globOK(r.Device, k.Device) && globOK(r.DType, k.DType) && globOK(r.Shape, k.Shape) {
			return r.ThresholdsPatch.apply(t)
		}
	}
	return t
}

func globOK(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	ok, _ := path.Match(pattern, s) // patterns were checked by LoadConfig
	return ok
}

// LoadConfig reads a configuration file strictly: unknown fields and bad values are errors,
// so a typo never silently leaves the defaults in force.
func LoadConfig(file string) (Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Config{}, errs.New(errs.Input, "config %s: %v", file, err)
	}
	return ParseConfig(file, data)
}

// ParseConfig parses configuration JSON; name is for error messages.
func ParseConfig(name string, data []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, errs.New(errs.Parse, "config %s: %v", name, err)
	}
	if dec.More() {
		return Config{}, errs.New(errs.Parse, "config %s: trailing data after the JSON object", name)
	}
	if err := checkThresholds(name, "defaults", c.Defaults.apply(DefaultThresholds)); err != nil {
		return Config{}, err
	}
	for i, r := range c.Benchmarks {
		for _, p := range []string{r.Benchmark, r.Device, r.DType, r.Shape} {
			if _, err := path.Match(p, ""); err != nil {
				return Config{}, errs.New(errs.Parse, "config %s: benchmarks[%d]: bad pattern %q", name, i, p)
			}
		}
		where := "benchmarks[" + itoa(i) + "]"
		if err := checkThresholds(name, where, r.ThresholdsPatch.apply(c.Defaults.apply(DefaultThresholds))); err != nil {
			return Config{}, err
		}
	}
	return c.withDefaults(), nil
}

func checkThresholds(name, where string, t Thresholds) error {
	switch {
	case !(t.Warn > 0 && t.Warn <= t.Block):
		return errs.New(errs.Input, "config %s: %s: need 0 < warn <= block, got warn %g block %g", name, where, t.Warn, t.Block)
	case !(t.MinEffect >= 0 && t.MinEffect <= t.Warn):
		return errs.New(errs.Input, "config %s: %s: need 0 <= min_effect <= warn, got %g", name, where, t.MinEffect)
	case !(t.Alpha > 0 && t.Alpha < 1):
		return errs.New(errs.Input, "config %s: %s: alpha must be in (0,1), got %g", name, where, t.Alpha)
	case t.Window < 1 || t.MinRuns < 1 || t.MinRuns > t.Window:
		return errs.New(errs.Input, "config %s: %s: need 1 <= min_runs <= window, got %d and %d", name, where, t.MinRuns, t.Window)
	}
	return nil
}
