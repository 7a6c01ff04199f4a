package job

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/harness"
)

// A reduction order changed everywhere agrees with itself run after run; the main job's
// determinism suite still fails it, against the CPU class's pinned digests.
func TestDeterminismTasksCatchAChangeOfThePins(t *testing.T) {
	if !failpoint.Compiled {
		t.Skip("needs a failpoints build: go test -tags failpoints ./job")
	}
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	if err := failpoint.Activate(failpoint.CPUReduceRightToLeft); err != nil {
		t.Fatal(err)
	}
	defer failpoint.Activate() //nolint:errcheck // all off
	r := &runner{b: b, harness: harness.Runner{Backend: b}}
	ts, err := r.determinismTasks()
	if err != nil {
		t.Fatal(err)
	}
	failed, passed := 0, 0
	for _, task := range ts {
		res := task()
		switch {
		case res.Verdict == harness.VerdictPass:
			passed++
		case res.ErrorCode == string(errs.Nondeterministic) && strings.Contains(res.Reason, "report ack repro"):
			failed++
		default:
			t.Fatalf("%s: %s %s %s", res.Case, res.Verdict, res.ErrorCode, res.Reason)
		}
	}
	if failed == 0 || passed == 0 {
		t.Fatalf("pinned check: %d failed, %d passed; want the reduction cases to fail and the rest to pass", failed, passed)
	}
	t.Logf("%d cases off their pins, %d unchanged", failed, passed)
}
