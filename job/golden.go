package job

import (
	"fmt"
	"github.com/tessera-qa/tessera-qa/determinism/pins"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
	"slices"
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
// requires bitwise-equal outputs (digests), and where the backend's device class has pinned
// digests (golden/pins, determinism/pins) the first run must also give the pinned ones: a changed
// reduction order repeats itself and only the pins see it. Other processes, GOMAXPROCS settings
// and concurrent load are the suites' job; this catches state leaking between runs, map-order
// and data-race nondeterminism cheaply.
func (r *runner) determinismTasks() ([]task, error) {
	class := r.b.DeviceClass()
	pinned, hasPins, err := pins.Load(golden.Pins(), golden.PinsRoot, class)
	if err != nil {
		return nil, err
	}
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
			res := r.harness.Run(c)
			if p, ok := pinned.Cases[s.Name]; hasPins && ok && res.Verdict == harness.VerdictPass && !slices.Equal(p.Outputs, first) {
				got := pins.Pin{Outputs: first}.Digest()
				res.Verdict, res.ErrorCode = harness.VerdictFail, string(errs.Nondeterministic)
				res.Reason = fmt.Sprintf("%s: %s on %s gives digest %s, pinned %s for class %s (a change on purpose: %s)",
					errs.Nondeterministic, s.Name, r.b.Name(), got, p.Digest(), class, pins.AckCommand(class, s.Name, got))
			}
			return res
		})
	}
	return ts, nil
}
