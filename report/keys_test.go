package report_test

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/report"
)

// An acknowledgement's target must read back as the key it was made for: package pins finds
// the acks of its cases this way.
func TestParseReproKeyReadsBackString(t *testing.T) {
	for _, k := range []report.ReproKey{
		{Suite: "determinism", Case: "reduce_sum/f32/1x1031", DeviceClass: "cpu/amd64+fma", Determinism: "bitwise"},
		{Suite: "smoke", Case: "smoke/001", DeviceClass: "cuda/sm_90", Determinism: "unknown", Computation: "0a1b"},
	} {
		got, ok := report.ParseReproKey(k.String())
		if !ok || got != k {
			t.Errorf("ParseReproKey(%q) = %+v, %v; want %+v", k.String(), got, ok, k)
		}
	}
	for _, bad := range []string{"", "a|b", "a|b|c|d|e|f", "|case|cpu|bitwise", "suite||cpu|bitwise", "suite|case||bitwise"} {
		if k, ok := report.ParseReproKey(bad); ok {
			t.Errorf("ParseReproKey(%q) = %+v, accepted", bad, k)
		}
	}
}
