package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

func timedRow(op string, dt numerics.DType, shape []int, engineMS, torchMS, bytes float64, pass bool) Row {
	return Row{Case: Case{Op: op, DType: dt, Shape: shape}, EngineMS: engineMS, TorchMS: torchMS, Bytes: bytes,
		Check: harness.CheckResult{Pass: pass}, RefCheck: harness.CheckResult{Pass: true}}
}

// Each measured row is held to its bar: memory-bound rows as a share of the run's best copy,
// the others as a speedup; a row that failed its check has no result, rows without a target
// are left out.
func TestStandingsHoldEachRowToItsTarget(t *testing.T) {
	sq, mm := []int{8192, 8192}, []int{4096, 4096, 4096}
	rows := []Row{
		timedRow("copy", numerics.F32, sq, 0.2, 0.2, 560e6, true),                           // 2800 GB/s both sides: the copy bandwidth
		timedRow("cast", numerics.BF16, sq, 0.2, 0.25, 400e6, true),                         // 2000 GB/s: 71%
		timedRow("reduce_sum_cols", numerics.F32, sq, 0.1, 0.1, 260e6, true),                // 2600 GB/s: 93%
		timedRow("matmul", numerics.BF16, mm, 0.19, 0.2, 0, true),                           // 1.05x
		timedRow("batch_matmul", numerics.BF16, []int{8, 2048, 2048, 2048}, 1, 1, 0, false), // failed its check
		timedRow("softmax", numerics.F32, sq, 0.1, 0.1, 500e6, true),                        // no target
	}
	got := map[string]Standing{}
	for _, s := range Standings(rows) {
		got[s.Op] = s
	}
	want := map[string]string{"copy": "goal met", "cast": "NOT MET", "reduce_sum_cols": "goal met", "matmul": "goal met", "batch_matmul": "no result"}
	if len(got) != len(want) {
		t.Fatalf("standings %+v", got)
	}
	for op, v := range want {
		if got[op].Verdict != v {
			t.Errorf("%s: %s (value %.3f), want %s", op, got[op].Verdict, got[op].Value, v)
		}
	}
	if c := got["cast"].Value; c < 0.70 || c > 0.72 {
		t.Errorf("cast at %.3f of the copy bandwidth, want 2000/2800", c)
	}
	var b bytes.Buffer
	PrintTargets(&b, rows)
	for _, s := range []string{"cast/bf16/8192x8192", "71%", "85%", "NOT MET", "matmul/bf16/4096x4096x4096", "1.05x"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("targets table lacks %q:\n%s", s, b.String())
		}
	}
	// Without a copy row there is no bandwidth to hold memory-bound rows to.
	if st := Standings(rows[1:2]); len(st) != 1 || st[0].Verdict != "no result" {
		t.Errorf("without a copy row: %+v", st)
	}
}
