package report

import (
	"context"
)

// Flaky lists specs and cases that both passed and failed on one commit (and device class),
// newest first. A Ginkgo spec that passed only after retries counts its failed attempts.
func (db *DB) Flaky(ctx context.Context) ([]FlakySpec, error) {
	s, err := db.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return s.flaky, nil
}

func (db *DB) flaky(ctx context.Context, ix *runIndex) ([]FlakySpec, error) {
	rows, err := db.st.Outcomes(ctx, true)
	if err != nil {
		return nil, err
	}
	out := []FlakySpec{}
	for _, o := range rows {
		ids, err := db.st.OutcomeRuns(ctx, o)
		if err != nil {
			return nil, err
		}
		f := FlakySpec{Suite: o.Suite, Spec: o.Name, Kind: o.Kind, Commit: o.Commit, Passes: o.Passes, Fails: o.Fails,
			LastFailure: o.LastFailure, Runs: []RunRef{}}
		for _, id := range ids {
			f.Runs = append(f.Runs, ix.ref(id))
		}
		out = append(out, f)
	}
	return out, nil
}
