package pins

import (
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func recording(class string, cases map[string][]string) Recording {
	r := Recording{DeviceClass: class, Backend: "cpu", Digests: map[string][]string{}, Errors: map[string]string{}}
	for name, labels := range cases {
		for _, l := range labels {
			r.Digests[name] = append(r.Digests[name], digest(l))
		}
	}
	return r
}

func TestRefreshWritesAFirstRecordingWhole(t *testing.T) {
	rec := recording("cuda/sm_90", map[string][]string{"a": {"a"}, "b": {"b"}})
	f, d, err := Refresh(File{}, false, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.DeviceClass != "cuda/sm_90" || len(f.Cases) != 2 || f.Cases["a"].Outputs[0] != digest("a") || len(d.Added) != 2 {
		t.Errorf("first recording: %+v, diff %+v", f, d)
	}
}

// A change of a pinned digest is written only under an acknowledgement of exactly the new
// digest, whose reason the file then records; the refusal names every case, the class, both
// digests and the ack command.
func TestRefreshNeedsAnAckForEveryChangedPin(t *testing.T) {
	old := file("cpu/amd64", map[string][]string{"keep": {"k"}, "sum": {"s"}, "norm": {"n"}, "gone": {"g"}})
	old.Cases["keep"] = Pin{Outputs: old.Cases["keep"].Outputs, Accepted: &Accepted{Previous: digest("k0"), Reason: "earlier", By: "bo", Date: "2026-01-02"}}
	rec := recording("cpu/amd64", map[string][]string{"keep": {"k"}, "sum": {"s2"}, "norm": {"n2"}, "new": {"x"}})
	sumNew, normNew := Pin{Outputs: rec.Digests["sum"]}.Digest(), Pin{Outputs: rec.Digests["norm"]}.Digest()

	_, d, err := Refresh(old, true, rec, nil)
	wantCode(t, err, errs.Nondeterministic, "2 pinned digests on cpu/amd64", "sum (pinned "+old.Cases["sum"].Digest()[:16]+", got "+sumNew[:16],
		"norm (pinned", "tessera-qa report ack repro --suite determinism --case CASE --device-class cpu/amd64")
	if len(d.Changed) != 2 || len(d.Added) != 1 || len(d.Missing) != 1 {
		t.Errorf("diff with the refusal: %+v", d)
	}

	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	acks := []Ack{
		{Case: "sum", Digest: sumNew, Reason: "first try", By: "ada", Time: t0},
		{Case: "sum", Digest: sumNew, Reason: "reduce folds\nleft to right in pairs now", By: "Ada Lovelace", Time: t0.Add(time.Hour)},
		{Case: "norm", Digest: digest("another digest"), Reason: "wrong digest", By: "ada", Time: t0},
		{Case: "other", Digest: normNew, Reason: "wrong case", By: "ada", Time: t0},
	}
	_, _, err = Refresh(old, true, rec, acks)
	wantCode(t, err, errs.Nondeterministic, "1 pinned digests", "norm (pinned")
	if strings.Contains(err.Error(), "sum (") {
		t.Errorf("the acknowledged case is still refused: %v", err)
	}

	acks = append(acks, Ack{Case: "norm", Digest: normNew, Reason: "eps moved", By: "bo", Time: t0})
	f, _, err := Refresh(old, true, rec, acks)
	if err != nil {
		t.Fatal(err)
	}
	want := Accepted{Previous: old.Cases["sum"].Digest(), Reason: "reduce folds left to right in pairs now", By: "Ada Lovelace", Date: "2026-11-25"}
	if a := f.Cases["sum"].Accepted; a == nil || *a != want {
		t.Errorf("sum accepted = %+v, want the newest ack %+v", a, want)
	}
	if a := f.Cases["keep"].Accepted; a == nil || a.Reason != "earlier" {
		t.Errorf("an unchanged pin lost its acceptance: %+v", a)
	}
	if _, ok := f.Cases["gone"]; ok || f.Cases["new"].Outputs == nil || f.Cases["new"].Accepted != nil {
		t.Errorf("added and removed cases: %+v", f.Cases)
	}
	if _, err := Marshal(f); err != nil {
		t.Errorf("the refreshed file does not check: %v", err)
	}
}

func TestRefreshRefusesAnIncompleteRecordingOrAnotherClass(t *testing.T) {
	rec := recording("cpu/amd64", map[string][]string{"a": {"a"}})
	rec.Errors["b"] = "E_INTERNAL: panic during run"
	_, _, err := Refresh(File{}, false, rec, nil)
	wantCode(t, err, errs.Internal, "1 catalogue cases did not run", "b: E_INTERNAL: panic during run")

	old := file("cpu/amd64+fma", map[string][]string{"a": {"a"}})
	_, _, err = Refresh(old, true, recording("cpu/amd64", map[string][]string{"a": {"a"}}), nil)
	wantCode(t, err, errs.Input, "the file pins cpu/amd64+fma, the run was on cpu/amd64")
}

// A case of an op the code generator does not lower yet stays unpinned without refusing the
// recording; any other case that did not run refuses it.
func TestRecordingSetsAsideOnlyNotLoweredCases(t *testing.T) {
	r := Recording{DeviceClass: "cuda/sm_90", Errors: map[string]string{
		"fft/f32/1x1": "E_UNSUPPORTED: ptx: kernel k0: op fft (tile fft c2c_forward, n=1) " + ptx.NotLowered + "; it runs on the cpu backend"}}
	if err := r.err(); err != nil {
		t.Fatalf("a not-lowered case refused the recording: %v", err)
	}
	r.Errors["matmul/f32/2x3x4"] = "E_TIMEOUT: the launch did not return"
	err := r.err()
	if err == nil || !strings.Contains(err.Error(), "matmul/f32/2x3x4") || !strings.Contains(err.Error(), "1 catalogue cases") {
		t.Fatalf("want the matmul case refused alone, got %v", err)
	}
}
