package parse

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// DoctorFormat and DoctorVersion mark what `tessera-qa doctor --json` writes (doctor.Report,
// docs/health.md).
const (
	DoctorFormat  = "tessera.doctor"
	DoctorVersion = 1
)

// Where doctor runs go in the store:
//
//   - results (suite "doctor"): one per check, case = device/check ("gpu:0/nvml/ecc"), verdict
//     pass (pass or warn: the reason says warn), fail, or skip (skipped, with its reason);
//     an SDC failure carries E_SDC;
//   - metrics (kind "doctor", the dashboard's node page): one section per host and device
//     ("vm gpu:0"); per check a metric "CHECK verdict" (0 pass, 1 warn, 2 fail, -1 skipped)
//     and one "CHECK KEY" per number the verdict was drawn from (nvml/ecc volatile_dbe,
//     nvml/remapped-rows pending ...), so the history of ECC and remap counts is a series.
const (
	DoctorSuite  = "doctor"
	DoctorMetric = "doctor"
)

// DoctorReport is the reporter's reading of a doctor report.
type DoctorReport struct {
	Format  string        `json:"format"`
	Version int           `json:"version"`
	Level   int           `json:"level"`
	Host    string        `json:"host"`
	Started string        `json:"started"`
	NVML    string        `json:"nvml_source"`
	Devices []DoctorDev   `json:"devices"`
	Checks  []DoctorCheck `json:"checks"`
	Verdict string        `json:"verdict"`
}

// DoctorDev is one device of the report.
type DoctorDev struct {
	ID, Backend, Name, Class, UUID, SKU string
}

// DoctorCheck is one check.
type DoctorCheck struct {
	Name    string             `json:"name"`
	Level   int                `json:"level"`
	Device  string             `json:"device"`
	Verdict string             `json:"verdict"`
	Reason  string             `json:"reason"`
	Code    string             `json:"code"`
	Values  map[string]float64 `json:"values"`
	Seconds float64            `json:"seconds"`
	SDC     []struct {
		Case   string `json:"case"`
		Kernel string `json:"kernel"`
	} `json:"sdc"`
}

// DoctorVerdictValue is a check's verdict as the node page charts it.
func DoctorVerdictValue(v string) float64 {
	switch v {
	case "pass":
		return 0
	case "warn":
		return 1
	case "fail":
		return 2
	}
	return -1
}

// DoctorSection names a device's metric section: "HOST DEVICE".
func DoctorSection(host, device string) string { return host + " " + device }

func parseDoctor(file string, data []byte) (*Report, error) {
	var rep DoctorReport
	if err := decodeStrict(file, data, &rep); err != nil {
		return nil, err
	}
	c := NewChecker(file)
	if rep.Format != DoctorFormat || rep.Version != DoctorVersion {
		c.failf("doctor format %q version %d, this build reads %q version %d", clip(rep.Format), rep.Version, DoctorFormat, DoctorVersion)
		return nil, c.err
	}
	if rep.Level < 1 || rep.Level > 4 {
		c.failf("header: level %d out of range [1, 4]", rep.Level)
	}
	c.ident("header", "host", rep.Host, true)
	if len(rep.Checks) > MaxRows || len(rep.Devices) > maxJobs {
		c.failf("%d checks and %d devices (limits %d, %d)", len(rep.Checks), len(rep.Devices), MaxRows, maxJobs)
	}
	if c.err != nil {
		return nil, c.err
	}
	devs := map[string]DoctorDev{}
	classes := map[string]bool{}
	for i, d := range rep.Devices {
		where := fmt.Sprintf("device %d", i)
		c.ident(where, "id", d.ID, true)
		c.ident(where, "class", d.Class, false)
		devs[d.ID] = d
		if d.Class != "" {
			classes[d.Class] = true
		}
	}
	class := "cpu"
	for k := range classes {
		if strings.HasPrefix(k, "cuda") {
			class = "cuda"
		}
	}
	p := &Report{Kind: "doctor"}
	p.Batch.Run = store.RunRow{DeviceClass: class, Env: jsonString(map[string]string{"host": text(rep.Host), "level": fmt.Sprint(rep.Level), "nvml": text(rep.NVML)})}
	for i, ch := range rep.Checks {
		where := fmt.Sprintf("check %d", i)
		c.ident(where, "name", ch.Name, true)
		c.ident(where, "device", ch.Device, true)
		c.ident(where, "code", ch.Code, false)
		c.num(where, "seconds", ch.Seconds)
		var verdict string
		reason := text(ch.Reason)
		switch ch.Verdict {
		case "pass":
			verdict = harness.VerdictPass
		case "warn":
			verdict, reason = harness.VerdictPass, text("warn: "+ch.Reason)
		case "fail":
			verdict = harness.VerdictFail
		case "skipped":
			verdict = harness.VerdictSkip
		default:
			c.failf("%s: verdict %q, want pass, warn, fail or skipped", where, clip(ch.Verdict))
		}
		if c.err != nil {
			return nil, c.err
		}
		dev := devs[ch.Device]
		dc := dev.Class
		if dc == "" {
			dc = class
		}
		p.Batch.Results = append(p.Batch.Results, store.ResultRow{Suite: DoctorSuite, Case: ch.Device + "/" + ch.Name, DeviceClass: dc,
			Determinism: harness.DeterminismUnknown, Backend: "doctor", Device: text(dev.Name), Verdict: verdict, Reason: reason,
			ErrorCode: ch.Code, TotalMS: ch.Seconds * 1000})
		section := DoctorSection(rep.Host, ch.Device)
		c.ident(where, "section", section, true)
		mv := ch.Verdict
		if mv == "warn" {
			mv = "pass"
		} else if mv == "skipped" {
			mv = ""
		}
		p.Batch.Metrics = append(p.Batch.Metrics, store.MetricRow{Kind: DoctorMetric, Name: section, Metric: ch.Name + " verdict",
			Unit: "verdict", Value: DoctorVerdictValue(ch.Verdict), Verdict: mv, Note: reason})
		keys := make([]string, 0, len(ch.Values))
		for k := range ch.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := ch.Values[k]
			if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > maxNumber {
				c.failf("%s: value %s = %g out of range", where, clip(k), v)
				return nil, c.err
			}
			c.ident(where, "value", k, true)
			p.Batch.Metrics = append(p.Batch.Metrics, store.MetricRow{Kind: DoctorMetric, Name: section, Metric: ch.Name + " " + k, Value: v, Verdict: mv})
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	p.Batch.Suites = resultSuites(p.Batch.Results)
	return p, nil
}
