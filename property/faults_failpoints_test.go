//go:build failpoints

package property

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// TestTileAndAccumFaultsPerProperty measures, in a failpoints build, at which draw each
// property that can see them first fails under the planted faults of issue 21 and the two
// older row-kernel faults, at CI's seed, with the edge schedule and without it (NoEdges: the
// generator as it was before the schedule): docs/property.md quotes it.
//
//	go test -tags failpoints -run TestTileAndAccumFaultsPerProperty -v ./property
func TestTileAndAccumFaultsPerProperty(t *testing.T) {
	if err := flag.Set("rapid.shrinktime", "1ms"); err != nil { // the first failing draw is what is measured
		t.Fatal(err)
	}
	faults := []string{failpoint.SoftmaxMaxInitZero, failpoint.CPUSoftmaxSumNotRescaled, failpoint.CPUSoftmaxMaxFrozen,
		failpoint.LogSoftmaxFirstTileMax, failpoint.MatmulNarrowAccumRoundedOnce, failpoint.ReduceAccumIgnoredF64}
	props, _ := Select([]string{"agree/ref", "agree/nan-inf", "accum/bits"})
	defer failpoint.Activate()                                    //nolint:errcheck // switching every fault off
	if only := os.Getenv("TESSERA_FAILPOINTS_ONLY"); only != "" { // one fault, to re-measure it
		faults = strings.Split(only, ",")
	}
	for _, f := range faults {
		if err := failpoint.Activate(f); err != nil {
			t.Fatal(err)
		}
		for _, noEdges := range []bool{true, false} {
			for _, p := range props {
				if p.Name == "accum/bits" && noEdges {
					continue
				}
				o := Run(RunOptions{Properties: []Property{p}, Backends: []backend.Backend{cpu(t)}, Config: DefaultConfig(),
					Seed: ciSeed, Artifacts: t.TempDir(), NoEdges: noEdges})[0]
				caught := "missed"
				if o.Verdict == Fail {
					caught = "caught at draw " + itoa(o.Passed+1)
				}
				t.Logf("%-46s %-14s edges=%-5v %s (%d draws) %.200s", f, p.Name, !noEdges, caught, o.Checks, o.Reason)
			}
		}
	}
}

func itoa(n int) string {
	s := ""
	for {
		s = string(rune('0'+n%10)) + s
		n /= 10
		if n == 0 {
			return s
		}
	}
}
