package job

import (
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// goldenData is the data the golden suite checks against; tests may point it elsewhere.
var goldenData = golden.Data

// goldenTasks checks every case of every golden file the catalogue produces. A file that
// cannot be loaded (missing, corrupt) becomes one errored result named after the file, so the
// rest of the suite still runs.
func (r *runner) goldenTasks() ([]task, error) {
	fsys := goldenData()
	var ts []task
	seen := map[string]bool{}
	for _, s := range golden.Catalogue() {
		if seen[s.File()] {
			continue
		}
		seen[s.File()] = true
		f, err := golden.Load(fsys, s.Op, s.DType)
		if err != nil {
			name := s.File()
			ts = append(ts, func() harness.Result { return r.errored(golden.Suite, name, err) })
			continue
		}
		for _, c := range f.Cases {
			ts = append(ts, func() harness.Result { return r.goldenCase(c) })
		}
	}
	return ts, nil
}

// goldenCase checks one stored case and, when it fails, writes a replay manifest that judges
// the same graph and inputs against the golden model under the stored tolerances (the stored
// outputs are what that model produced).
func (r *runner) goldenCase(c golden.GoldenCase) harness.Result {
	res := golden.CheckSpec(c, r.b)
	if !res.Failed() || r.harness.ArtifactsDir == "" {
		return res
	}
	hc := harness.Case{Suite: golden.Suite, Name: c.Name, Graph: c.Graph, Inputs: c.Inputs, Seed: c.Seed,
		Tolerances: c.Tolerances, Labels: []string{"golden", c.Op, c.DType.String()}}
	m, err := harness.ManifestFor(hc, res)
	if err == nil {
		res.Replay, err = harness.WriteManifest(r.harness.ArtifactsDir, m)
	}
	if err != nil {
		res.Reason += " (replay manifest not written: " + err.Error() + ")"
	}
	return res
}

// determinismTasks runs every catalogue spec twice in this process on the same backend and
// requires bitwise-equal outputs (digests). Other processes, GOMAXPROCS settings and
// concurrent load are the suites' job; this catches state leaking between runs, map-order
// and data-race nondeterminism cheaply.
func (r *runner) determinismTasks() ([]task, error) {
	var ts []task
	for _, s := range golden.Catalogue() {
		ts = append(ts, func() harness.Result {
			first, err := golden.RunDigests(s, r.b)
			if err != nil {
				return r.errored(SuiteDeterminism, s.Name, errs.Wrap(errs.Internal, err, "first run"))
			}
			c := s.Case()
			c.Suite, c.ExpectDigests = SuiteDeterminism, first
			c.Labels = []string{"determinism", s.Op, s.DType.String()}
			return r.harness.Run(c)
		})
	}
	return ts, nil
}
