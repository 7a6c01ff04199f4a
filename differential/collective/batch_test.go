package collective

import (
	"context"
	"testing"

	"github.com/tessera-qa/tessera-qa/differential/gloo"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// CheckAll (a gloo group per world) must give every row the verdict and the digests Check gives
// it alone, a refusal inside a batch included (this file's test runs first in the package, so
// gloo's refusal of reduce_scatter is not cached yet and comes from the batch's group).
func TestCheckAllGivesCheckResults(t *testing.T) {
	needGloo(t)
	ctx := context.Background()
	rows := []Row{
		{Op: "all_reduce", Red: "sum", DType: numerics.F32, World: 2},
		{Op: "reduce_scatter", Red: "sum", DType: numerics.F32, World: 2},
		{Op: "all_reduce", Red: "avg", DType: numerics.F16, World: 2},
		{Op: "all_gather", DType: numerics.BF16, World: 4},
		{Op: "broadcast", DType: numerics.I32, World: 4},
	}
	all := CheckAll(ctx, gloo.Config{}, rows)
	if all[1].Verdict != harness.VerdictSkip || all[1].ErrorCode != string(errs.Unsupported) {
		t.Errorf("%s in a batch: %s %s %s, want gloo's refusal as a skip", rows[1].Name(), all[1].Verdict, all[1].ErrorCode, all[1].Reason)
	}
	for i, r := range rows {
		one := Check(ctx, gloo.Config{}, r)
		if all[i].Verdict != one.Verdict || all[i].Digest != one.Digest || len(all[i].Outputs) != len(one.Outputs) {
			t.Errorf("%s: batched %s %q (%s), alone %s %q (%s)", r.Name(), all[i].Verdict, all[i].Digest, all[i].Reason, one.Verdict, one.Digest, one.Reason)
			continue
		}
		if i != 1 && all[i].Verdict != harness.VerdictPass {
			t.Errorf("%s: %s %s", r.Name(), all[i].Verdict, all[i].Reason)
		}
	}
}
