package mig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A recording of a replayed session replays to the same health: the recorder asks every call
// the reader asks and writes what it answered, for every fixture (absent symbols, lost GPUs,
// NVLink and XIDs included).
func TestRecordingAReplayReadsBackTheSame(t *testing.T) {
	files, _ := filepath.Glob("testdata/nvml-health/*.json")
	if len(files) < 8 {
		t.Fatalf("%d fixtures", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseHealthRecord(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want, err := h.read()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rec, err := h.record("again")
		if err != nil {
			t.Fatalf("%s: record: %v", f, err)
		}
		b2, _ := json.Marshal(rec)
		h2, err := ParseHealthRecord(b2)
		if err != nil {
			t.Fatalf("%s: the recording does not parse: %v", f, err)
		}
		got, err := h2.read()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: replaying the recording gives\n%+v\nwant\n%+v (%v)", f, got, want, err)
		}
	}
}

// Each fixture's fields come through: the pending remap, the DBEs, the thermal mask, the lost
// GPU, the degraded link, the absent symbols.
func TestFixturesReadAsRecorded(t *testing.T) {
	read := func(name string) HealthReport {
		r, err := ReplayHealth("testdata/nvml-health/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if g := read("h100-row-remap-pending.json").GPUs[0]; g.RemappedRows == nil || !g.RemappedRows.Pending || g.RemappedRows.Uncorrectable != 1 {
		t.Errorf("remap: %+v", g.RemappedRows)
	}
	if g := read("h100-dbe.json").GPUs[0]; g.ECC == nil || g.ECC.VolatileDBE != 2 || !reflect.DeepEqual(g.XIDs, []uint64{48}) {
		t.Errorf("dbe: %+v %v", g.ECC, g.XIDs)
	}
	if g := read("h200-thermal-throttle.json").GPUs[0]; g.ClockEvents == nil || *g.ClockEvents != ClockEventHWThermal|ClockEventSWThermal || *g.TemperatureC != 93 {
		t.Errorf("thermal: %+v", g)
	}
	r := read("h100-xid79.json")
	if !r.GPUs[1].Lost || r.GPUs[0].Lost || len(r.GPUs[0].NVLinks) != 18 || r.GPUs[1].ECC != nil {
		t.Errorf("xid79: %+v", r.GPUs)
	}
	if g := read("h100-pcie-x8.json").GPUs[0]; g.PCIe == nil || g.PCIe.Width != 8 || g.PCIe.MaxWidth != 16 || *g.PCIe.Replays != 3 {
		t.Errorf("pcie: %+v", g.PCIe)
	}
	g := read("h100-old-nvml.json").GPUs[0]
	if g.RemappedRows != nil || g.ClockEvents != nil || g.XIDs != nil || g.Skipped["remapped_rows"] != "symbol nvmlDeviceGetRemappedRows absent from this libnvidia-ml" {
		t.Errorf("old nvml: %+v", g)
	}
}
