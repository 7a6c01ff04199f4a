package pins

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/backendtest"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/golden"
)

// The reason pins exist: a reduction folded right to left instead of left to right gives
// the same bits on every run, so every comparison of runs with each other passes, while the
// checked-in pins catch it. Run with `go test -tags failpoints ./determinism/pins -run Planted`.
func TestPlantedReductionOrderIsSelfConsistentButCaughtByThePins(t *testing.T) {
	if !failpoint.Compiled {
		t.Skip("needs a failpoints build: go test -tags failpoints ./determinism/pins -run Planted")
	}
	b := backendtest.CPU(t)
	pinned, ok, err := Load(golden.Pins(), golden.PinsRoot, b.DeviceClass())
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skipf("no pinned digests for class %s in golden/pins", b.DeviceClass())
	}
	specs := specsOf(t, "reduce_sum/f32/3x1031-axis1", "reduce_mean/f64/13x19x7-axes0+2-keep", "layernorm/f32/3x1031", "add/f32/1031")
	if err := failpoint.Activate(failpoint.CPUReduceRightToLeft); err != nil {
		t.Fatal(err)
	}
	defer failpoint.Activate() //nolint:errcheck // every fault off again
	first, err := Record(specs, b, pinned)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Record(specs, b, pinned)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first.Digests, again.Digests) {
		t.Fatal("under the planted fault two runs differ: the fault is not the self-consistent kind this test is about")
	}
	d := Compare(pinned, first.Digests)
	var changed []string
	for _, c := range d.Changed {
		changed = append(changed, c.Case)
	}
	want := []string{"layernorm/f32/3x1031", "reduce_mean/f64/13x19x7-axes0+2-keep", "reduce_sum/f32/3x1031-axis1"}
	if !reflect.DeepEqual(changed, want) {
		t.Fatalf("pins changed for %v, want %v (add has no reduction)", changed, want)
	}
	_, _, err = Refresh(pinned, true, first, nil)
	if errs.CodeOf(err) != errs.Nondeterministic || !strings.Contains(err.Error(), "reduce_sum/f32/3x1031-axis1") {
		t.Fatalf("Refresh without an ack: %v, want E_NONDETERMINISTIC naming the case", err)
	}
}
