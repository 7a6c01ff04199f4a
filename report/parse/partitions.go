package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// The partitions suite (suites/partitions) reports its measurements as Ginkgo report entries
// whose values are structs; Ginkgo's JSON report keeps each value's JSON in Value.AsJSON. The
// entries read here become metrics of kind "partitions" (the dashboard's Partitions section):
//
//   - "interference": section PartitionsInterference, one metric per pair of neighbours (its
//     throughput ratio, loaded to alone; the times in the note);
//   - "golden on partitions": section PartitionsGolden, one metric per SM count, the specs
//     of the golden catalogue whose bits differ from the whole GPU's.
//
// Each takes the verdict of the spec that reported it (a golden entry with different bits
// fails whatever the spec said). Entries whose value is not an object (prose from before the
// structs) are left out: there is nothing to chart in them.
const (
	PartitionsMetric       = "partitions"
	PartitionsInterference = "interference (green-context SM partitions)"
	PartitionsGolden       = "golden catalogue on SM partitions"
)

// Entry names (suites/partitions/entries_test.go).
const (
	interferenceEntry = "interference"
	goldenEntry       = "golden on partitions"
)

type ginkgoEntry struct {
	Name  string
	Value struct{ AsJSON string }
}

type interferenceValue struct {
	Pair     *string  `json:"pair"`
	Ratio    *float64 `json:"ratio"`
	AloneMS  float64  `json:"alone_ms"`
	LoadedMS float64  `json:"loaded_ms"`
	Reps     int      `json:"reps"`
}

type goldenValue struct {
	Specs     int   `json:"specs"`
	SMs       *int  `json:"sms"`
	Differing int   `json:"differing"`
	SameBits  *bool `json:"same_bits"`
}

// specVerdict is the verdict a spec's state gives the metrics its entries report ("" for a
// skipped or pending spec).
func specVerdict(state string) string {
	switch {
	case state == "passed":
		return harness.VerdictPass
	case specFailed(state):
		return harness.VerdictFail
	}
	return ""
}

// partitionEntries appends the metrics of one spec's report entries to p.
func partitionEntries(c *Checker, where, state string, entries []ginkgoEntry, p *Report) {
	verdict := specVerdict(state)
	for i, e := range entries {
		if e.Name != interferenceEntry && e.Name != goldenEntry {
			continue
		}
		raw := bytes.TrimSpace([]byte(e.Value.AsJSON))
		if len(raw) == 0 || raw[0] != '{' {
			continue
		}
		w := where + " entry " + strconv.Itoa(i) + " (" + e.Name + ")"
		m := func(section, metric, unit string, v float64, verdict, note string) {
			p.Batch.Metrics = append(p.Batch.Metrics, store.MetricRow{Kind: PartitionsMetric, Name: section, Metric: metric,
				Unit: unit, Value: c.num(w, metric, v), Verdict: verdict, Note: note})
		}
		switch e.Name {
		case interferenceEntry:
			var v interferenceValue
			if err := json.Unmarshal(raw, &v); err != nil || v.Pair == nil || v.Ratio == nil {
				c.failf("%s: want {pair, ratio, alone_ms, loaded_ms, reps}", w)
				return
			}
			c.ident(w, "pair", *v.Pair, true)
			c.num(w, "alone_ms", v.AloneMS)
			c.num(w, "loaded_ms", v.LoadedMS)
			if v.Reps < 0 {
				c.failf("%s: negative reps", w)
			}
			m(PartitionsInterference, *v.Pair, "ratio", *v.Ratio, verdict,
				fmt.Sprintf("alone %.3f ms, with the neighbour %.3f ms (%d reps)", v.AloneMS, v.LoadedMS, v.Reps))
		case goldenEntry:
			var v goldenValue
			if err := json.Unmarshal(raw, &v); err != nil || v.SMs == nil || v.SameBits == nil {
				c.failf("%s: want {specs, sms, differing, same_bits}", w)
				return
			}
			if *v.SMs < 0 || v.Specs < 0 || v.Differing < 0 || v.Differing > v.Specs {
				c.failf("%s: sms %d, specs %d, differing %d out of range", w, *v.SMs, v.Specs, v.Differing)
				return
			}
			same, gv := "yes", verdict
			if !*v.SameBits {
				same, gv = "no", harness.VerdictFail
			}
			m(PartitionsGolden, strconv.Itoa(*v.SMs)+" SMs: specs differing from the whole GPU", "specs", float64(v.Differing), gv,
				fmt.Sprintf("of %d specs; same bits: %s", v.Specs, same))
		}
	}
}
