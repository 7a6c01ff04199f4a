package pins

import (
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Recording is one run of the catalogue on one backend.
type Recording struct {
	DeviceClass string
	Backend     string
	// Digests maps each case that ran to its output digests.
	Digests map[string][]string
	// Errors maps each case that did not run to why.
	Errors map[string]string
	// Results has one harness result per case (suite Suite), judged against the pinned
	// digests where there are some, else against a first run: what the results store keeps,
	// so that a changed digest can be acknowledged there.
	Results []harness.Result
}

// Record runs every spec once on b and judges it against pinned (the zero File: no pins).
// An unavailable backend is E_NO_DEVICE.
func Record(specs []golden.Spec, b backend.Backend, pinned File) (Recording, error) {
	if err := b.Available(); err != nil {
		return Recording{}, errs.Wrap(errs.NoDevice, err, "pins: backend %s", b.Name())
	}
	rec := Recording{DeviceClass: b.DeviceClass(), Backend: b.Name(), Digests: map[string][]string{}, Errors: map[string]string{}}
	run := harness.Runner{Backend: b}
	for _, s := range specs {
		c := s.Case()
		c.Suite, c.Labels = Suite, []string{"determinism", "pinned", s.Op, s.DType.String()}
		c.ExpectDigests = pinned.Cases[s.Name].Outputs
		if len(c.ExpectDigests) != len(s.Graph.Outputs) {
			// Not pinned (or pinned with another output count): judged against a first run,
			// as `tessera-qa run` judges its determinism cases.
			first, err := golden.RunDigests(s, b)
			if err != nil {
				rec.Errors[s.Name] = err.Error()
				continue
			}
			c.ExpectDigests = first
		}
		r := run.Run(c)
		rec.Results = append(rec.Results, r)
		if r.Verdict == harness.VerdictError || r.Verdict == harness.VerdictSkip {
			rec.Errors[s.Name] = r.Reason
			continue
		}
		outs := make([]string, len(r.Outputs))
		for i, o := range r.Outputs {
			outs[i] = o.Digest
		}
		rec.Digests[s.Name] = outs
	}
	return rec, nil
}
