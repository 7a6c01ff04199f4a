package parse_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/parse"
)

// testdata/ginkgo/partitions-standin.json is a real Ginkgo JSON report (ginkgo v2.34.0) of a
// stand-in suite that adds the partitions suite's entries (suites/partitions/entries_test.go)
// with made-up numbers: the serialization is Ginkgo's, the values are not measurements.
func partitionsReport(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ginkgo", "partitions-standin.json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestPartitionEntriesBecomeMetrics(t *testing.T) {
	p, err := parse.Parse("partitions.json", partitionsReport(t))
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != "ginkgo" || len(p.Batch.Specs) != 3 {
		t.Fatalf("kind %q, %d specs", p.Kind, len(p.Batch.Specs))
	}
	ms := metricsOf(t, &p.Batch, parse.PartitionsMetric)
	if len(ms) != 6 { // 4 pairs, 2 SM counts; the prose entries are left out
		t.Errorf("%d metrics: %v", len(ms), ms)
	}
	bw := ms[parse.PartitionsInterference+": A bandwidth-bound (64 SMs) next to B bandwidth-bound (64 SMs)"]
	if bw.Unit != "ratio" || bw.Value < 0.775 || bw.Value > 0.776 || bw.Verdict != harness.VerdictPass ||
		bw.Note != "alone 9.100 ms, with the neighbour 11.740 ms (50 reps)" {
		t.Errorf("bandwidth pair %+v", bw)
	}
	g := ms[parse.PartitionsGolden+": 32 SMs: specs differing from the whole GPU"]
	if g.Value != 0 || g.Unit != "specs" || g.Verdict != harness.VerdictPass || g.Note != "of 816 specs; same bits: yes" {
		t.Errorf("golden on 32 SMs %+v", g)
	}
}

func TestPartitionEntriesAreChecked(t *testing.T) {
	data := string(partitionsReport(t))
	// Different bits fail the metric even if the spec (wrongly) passed.
	diff := strings.Replace(data, `{\"specs\":816,\"sms\":64,\"differing\":0,\"same_bits\":true}`,
		`{\"specs\":816,\"sms\":64,\"differing\":3,\"same_bits\":false}`, 1)
	p, err := parse.Parse("partitions.json", []byte(diff))
	if err != nil {
		t.Fatal(err)
	}
	g := metricsOf(t, &p.Batch, parse.PartitionsMetric)[parse.PartitionsGolden+": 64 SMs: specs differing from the whole GPU"]
	if g.Value != 3 || g.Verdict != harness.VerdictFail || !strings.Contains(g.Note, "same bits: no") {
		t.Errorf("golden with different bits %+v", g)
	}
	for name, edit := range map[string][2]string{
		"no pair":          {`{\"pair\":`, `{\"pear\":`},
		"negative ratio":   {`\"ratio\":0.`, `\"ratio\":-0.`},
		"control chars":    {`\"pair\":\"A FMA`, `\"pair\":\"A\\u0001FMA`},
		"no same_bits":     {`\"same_bits\":true}`, `\"same\":true}`},
		"more than it has": {`\"differing\":0`, `\"differing\":900`},
		"not JSON":         {`{\"specs\":816,\"sms\":32`, `{\"specs\":816,\"sms\":32,,`},
	} {
		bad := strings.Replace(data, edit[0], edit[1], 1)
		if bad == data {
			t.Fatalf("%s: the edit %q matches nothing", name, edit[0])
		}
		if _, err := parse.Parse("partitions.json", []byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
