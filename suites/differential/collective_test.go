package differential_test

import (
	"context"
	"os"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/differential/collective"
	"github.com/tessera-qa/tessera-qa/differential/gloo"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Collectives against torch.distributed with gloo on the CPU (docs/differential.md): every
// row of collective.Rows (op x reduction x dtype x world 2 and 4) runs on W gloo ranks (W
// Python processes) and on the engine's W in-process ranks in deterministic mode. A row gloo
// refuses is skipped with gloo's reason, never counted as a pass; without torch every spec
// skips with the reason, unless $TESSERA_QA_PYTHON asked for it (then they fail).

// glooProbe checks once that the interpreter can run gloo.
var glooProbe struct {
	once sync.Once
	info gloo.Info
	err  error
}

// needGloo skips (or fails, when torch was asked for) the calling spec when gloo cannot run.
func needGloo() {
	glooProbe.once.Do(func() { glooProbe.info, glooProbe.err = gloo.Probe(context.Background(), gloo.Config{}) })
	if err := glooProbe.err; err != nil {
		if errs.CodeOf(err) == errs.NoDevice && os.Getenv(differential.PythonEnv) == "" {
			Skip(err.Error())
		}
		Fail(err.Error())
	}
}

// glooTable checks every row at the first spec, a gloo group per world size, and keeps the
// results (the coverage spec reuses them).
var glooTable = collective.NewTable(gloo.Config{}, collective.Rows())

func glooResult(r collective.Row) harness.Result {
	needGloo()
	return glooTable.Result(r)
}

var _ = Describe("collectives: the engine on inproc ranks vs torch.distributed gloo on the cpu", Label("cpu", "torch", "gloo"), func() {
	for _, row := range collective.Rows() {
		It(row.Name()+" agrees", Label(row.Op), func() {
			r := glooResult(row)
			switch r.Verdict {
			case harness.VerdictPass:
			case harness.VerdictSkip:
				if r.ErrorCode == string(errs.NoDevice) && os.Getenv(differential.PythonEnv) != "" {
					Fail(r.Reason)
				}
				Skip(r.Reason)
			default:
				Fail(row.Name() + " [" + r.Verdict + "]: " + r.Reason)
			}
		})
	}

	// What issue 9 names and gloo has (differential/gloo's doc): these rows must be compared,
	// so a gloo that starts refusing them, or a table that loses them, cannot pass by skipping.
	It("compares every row gloo supports: all_reduce sum/max/min, all_gather, broadcast, all_to_all on f64/f32/int32 (+f16) on 2 and 4 ranks", func() {
		var missing []string
		for _, row := range collective.Rows() {
			need := row.DType.String() != "bf16" && (row.Red == "" || row.Red == "sum" || row.Red == "max" || row.Red == "min") && row.Op != "reduce_scatter"
			if !need {
				continue
			}
			if r := glooResult(row); r.Verdict != harness.VerdictPass {
				missing = append(missing, row.Name()+" ["+r.Verdict+"]")
			}
		}
		Expect(missing).To(BeEmpty(), "rows not compared: %s", strings.Join(missing, ", "))
	})
})
