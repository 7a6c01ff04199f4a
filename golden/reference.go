package golden

import (
	"runtime"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// CheckReference runs the golden model (engine/ref) on the case's stored inputs and compares
// with the stored outputs under the stored tolerance: it fails when the golden model has
// drifted since the files were generated (a changed formula, a changed rounding), which would
// otherwise silently move the goalposts of every engine check. A multi-rank case runs
// ref.RunDist on every rank's stored inputs.
func CheckReference(c GoldenCase) harness.Result {
	if c.World > 0 {
		return checkReferenceDist(c)
	}
	b := refBackend{}
	r := newResult(c, b)
	if r.Verdict != "" {
		return r
	}
	start := time.Now()
	r = finishRun(r, c, &compiler.Program{Graph: c.Graph}, b)
	r.Timing.TotalMS = msSince(start)
	return r
}

// refBackend presents the golden model as a backend to the comparison code. It ignores the
// program's kernels and evaluates its graph; it is not registered, so suites never mistake it
// for an engine backend.
type refBackend struct{}

func (refBackend) Name() string        { return "ref" }
func (refBackend) Available() error    { return nil }
func (refBackend) Device() string      { return "golden model (engine/ref, float64)" }
func (refBackend) DeviceClass() string { return "ref/" + runtime.GOARCH }
func (refBackend) Run(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return ref.Run(p.Graph, in)
}
