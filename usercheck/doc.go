// Package usercheck runs every check that applies to one user graph (`tessera-qa check`):
// verify, compile, run on each available backend, the float64 golden model, determinism in
// and across processes and across backends of one device class, the differential oracle,
// gradients against float64 finite differences, the metamorphic relations of its ops, and
// the sharded program against the one-rank answer. Each check is a row of harness.Result
// (suite "check"), so the JSON `tessera-qa report ingest` reads is the rows themselves, and
// every failing row names a replay manifest that `tessera-qa replay` re-runs.
//
// The checks are the existing packages' (harness, gradients, property, sharded,
// differential); this package chooses which apply and turns their outcomes into rows.
package usercheck
