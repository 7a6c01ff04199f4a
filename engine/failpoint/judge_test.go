package failpoint

import (
	"slices"
	"strings"
	"testing"
)

// The judges' faults are a layer of their own: judge/AREA/BUG, none also an engine fault, and
// in a normal build none of them can be on.
func TestJudgeNamesAreTheirOwnLayer(t *testing.T) {
	seen := map[string]bool{}
	engine := append(append(Names(), GPUNames()...), StressNames()...)
	for _, n := range JudgeNames() {
		rest, ok := strings.CutPrefix(n, "judge/")
		if !ok || !strings.Contains(rest, "/") || strings.ContainsAny(n, " ,=") {
			t.Errorf("judge fault %q: want judge/AREA/BUG without spaces, commas or '='", n)
		}
		if seen[n] || slices.Contains(engine, n) {
			t.Errorf("judge fault %q listed twice", n)
		}
		seen[n] = true
		if !Compiled && (Enabled(n) || Pick(n, 1, 2) != 1) {
			t.Errorf("judge fault %q is on in a normal build", n)
		}
	}
	if len(seen) < 8 {
		t.Errorf("%d judge faults: want one per decision of the judges (at least 8)", len(seen))
	}
}
