package pins

import (
	"slices"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/backendtest"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Record gives each case's output digests and a result the results store can keep: judged
// against the pin where there is one (a changed pin fails with E_NONDETERMINISTIC) and
// against a first run where there is none.
func TestRecordDigestsAndResults(t *testing.T) {
	b := backendtest.CPU(t)
	specs := specsOf(t, "reduce_sum/f32/3x1031-axis1", "add/f32/1031")
	pinned := file(b.DeviceClass(), map[string][]string{"reduce_sum/f32/3x1031-axis1": {"not these bits"}})
	rec, err := Record(specs, b, pinned)
	if err != nil {
		t.Fatal(err)
	}
	if rec.DeviceClass != b.DeviceClass() || rec.Backend != "cpu" || len(rec.Errors) != 0 || len(rec.Results) != 2 {
		t.Fatalf("recording: class %s, backend %s, errors %v, %d results", rec.DeviceClass, rec.Backend, rec.Errors, len(rec.Results))
	}
	for i, s := range specs {
		want, err := golden.RunDigests(s, b)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rec.Digests[s.Name], want) {
			t.Errorf("%s: digests %v, want %v", s.Name, rec.Digests[s.Name], want)
		}
		r := rec.Results[i]
		if r.Suite != Suite || r.Case != s.Name || r.DeviceClass != b.DeviceClass() || r.Digest != harness.CombineDigests(want) || r.Computation == "" {
			t.Errorf("%s: result %s/%s on %s, digest %s, computation %q", s.Name, r.Suite, r.Case, r.DeviceClass, r.Digest, r.Computation)
		}
	}
	if r := rec.Results[0]; r.Verdict != harness.VerdictFail || r.ErrorCode != string(errs.Nondeterministic) {
		t.Errorf("a case whose pin differs: verdict %s, code %s; want fail, E_NONDETERMINISTIC", r.Verdict, r.ErrorCode)
	}
	if r := rec.Results[1]; r.Verdict != harness.VerdictPass {
		t.Errorf("an unpinned case: verdict %s (%s), want pass", r.Verdict, r.Reason)
	}
}
