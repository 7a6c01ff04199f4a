package dashboard

import (
	"context"
	"strings"

	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/parse"
)

// The node page: what `tessera-qa doctor --json` said of each device of each host, from the
// metrics report ingest makes of it (parse/doctor.go): the last verdict of every check, the
// history of the ECC, retired-page and row-remap counts, and the SDC scans.

type nodesData struct {
	base
	Devices []nodeDevice
}

// nodeDevice is one host's device.
type nodeDevice struct {
	Name   string // "HOST DEVICE"
	Last   report.RunRef
	Worst  string // the last run's worst verdict: pass, warn, fail
	Checks []nodeCheck
	SDC    []nodeCheck // every run's SDC checks, newest first
	Groups []chartGroup
	Runs   int
}

type nodeCheck struct {
	Run     report.RunRef
	Check   string
	Verdict string // pass, warn, fail, skipped
	Note    string
}

var nodeGroups = []chartGroupSpec{
	{ID: "ecc", Title: "ECC errors", Takes: func(m string) bool { return strings.HasPrefix(m, "nvml/ecc ") && !strings.HasSuffix(m, " verdict") }},
	{ID: "remap", Title: "Row remaps and retired pages", Takes: func(m string) bool {
		return (strings.HasPrefix(m, "nvml/remapped-rows ") || strings.HasPrefix(m, "nvml/retired-pages ")) && !strings.HasSuffix(m, " verdict")
	}},
	{ID: "sdc", Title: "SDC scans: differing outputs", Takes: func(m string) bool { return strings.HasSuffix(m, " differing_outputs") }},
}

func verdictName(v float64) string {
	switch v {
	case 0:
		return "pass"
	case 1:
		return "warn"
	case 2:
		return "fail"
	}
	return "skipped"
}

func (s *Site) nodes(ctx context.Context) (nodesData, error) {
	secs, err := s.db.Metrics(ctx, parse.DoctorMetric)
	if err != nil {
		return nodesData{}, err
	}
	d := nodesData{base: s.base("Nodes", PageNodes)}
	for _, sec := range secs {
		if len(sec.Rows) == 0 {
			continue
		}
		last := sec.Rows[len(sec.Rows)-1].Run
		nd := nodeDevice{Name: sec.Name, Last: last, Worst: "pass"}
		runs := map[int64]bool{}
		for _, r := range sec.Rows {
			runs[r.Run.ID] = true
			check, ok := strings.CutSuffix(r.Metric, " verdict")
			if !ok {
				continue
			}
			c := nodeCheck{Run: r.Run, Check: check, Verdict: verdictName(r.Value), Note: r.Note}
			if strings.HasPrefix(check, "sdc/") || strings.HasPrefix(check, "known-answer/") || strings.HasSuffix(check, "/known-answer-under-load") {
				nd.SDC = append([]nodeCheck{c}, nd.SDC...)
			}
			if r.Run.ID != last.ID {
				continue
			}
			nd.Checks = append(nd.Checks, c)
			if r.Value > 0 && (nd.Worst == "pass" || r.Value == 2) {
				nd.Worst = c.Verdict
			}
		}
		nd.Runs = len(runs)
		nd.Groups = chartGroups(sec.Rows, nodeGroups)
		d.Devices = append(d.Devices, nd)
	}
	return d, nil
}
