package parse_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/report/parse"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// FuzzIngest feeds arbitrary bytes to the ingest parser, the only gate between a file and the
// store. Whatever the input: no panic; a rejection is one line with code E_PARSE or E_INPUT
// naming the file; an acceptance has rows, and everything in them is storable (PostgreSQL
// refuses NUL and invalid UTF-8; the analyses need finite, non-negative numbers). Seeds:
// testdata/fuzz/FuzzIngest (each kind of report and hostile ones), the reporter's fixtures and
// testdata/stress and testdata/ginkgo (stress reports, the partitions and ptxas suites' entries).
// That a rejected file leaves the store unchanged is checked on real stores by the report
// package's TestIngestCorpus, over the same seeds.
func FuzzIngest(f *testing.F) {
	for _, name := range []string{"results.json", "ginkgo.json", "bench.json"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, name := range []string{"stress/soak-h100.json", "stress/oom-h100.json", "stress/cache-h100.json", "ginkgo/partitions-standin.json", "ginkgo/ptxas.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := parse.Parse("fuzz.json", data)
		if err != nil {
			if c := errs.CodeOf(err); c != errs.Parse && c != errs.Input {
				t.Fatalf("rejected with code %s: %v", c, err)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "fuzz.json") {
				t.Fatalf("error %q: want one line naming the file", msg)
			}
			return
		}
		if rep.Batch.Rows() == 0 {
			t.Fatal("accepted a report with no rows")
		}
		storable(t, &rep.Batch)
	})
}

func storable(t *testing.T, b *store.Batch) {
	strs := []string{b.Run.Commit, b.Run.Branch, b.Run.Event, b.Run.Machine, b.Run.DeviceClass, b.Run.Env}
	var nums []float64
	for _, r := range b.Results {
		strs = append(strs, r.Suite, r.Case, r.DeviceClass, r.Determinism, r.Verdict, r.Reason, r.Digest, r.ErrorCode, r.Replay)
		nums = append(nums, r.TotalMS)
	}
	for _, s := range b.Specs {
		strs = append(strs, s.Suite, s.Name, s.State, s.Failure, s.Location)
		nums = append(nums, s.DurationMS)
	}
	for _, x := range b.Bench {
		strs = append(strs, x.Key.Benchmark, x.Key.Device, x.Key.DType, x.Key.Shape, x.Unit)
		nums = append(nums, x.Value, x.EngineMS, x.RefMS, x.Ratio, x.TFLOPS, x.GBps)
		nums = append(nums, x.Samples...)
	}
	for _, m := range b.Metrics {
		strs = append(strs, m.Kind, m.Name, m.Metric, m.Unit, m.Verdict, m.Note)
		// Metrics may be negative (a leak monitor's slope), never NaN or infinite.
		if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
			t.Fatalf("accepted metric %s = %g", m.Metric, m.Value)
		}
	}
	for _, s := range b.Suites {
		strs = append(strs, s.Suite)
		strs = append(strs, s.Failing...)
	}
	for _, s := range strs {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			t.Fatalf("accepted text PostgreSQL cannot store: %q", s)
		}
	}
	for _, v := range nums {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Fatalf("accepted number %g", v)
		}
	}
}
