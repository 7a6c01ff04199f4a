// Package report is the reporter: the results history and what is read from it.
//
//   - Store: report/store (SQLite or PostgreSQL, versioned migrations, transactional
//     ingest). Open / OpenReadOnly here wrap it with analyses.
//   - Ingest (ingest.go, formats in results.go, ginkgo.go, bench.go): harness results JSON,
//     Ginkgo JSON reports and bench JSON, validated before anything is written; a bad file
//     changes nothing.
//   - Reproducibility tracker (repro.go): digests per (case, device class, determinism mode);
//     a new digest is a regression until acknowledged.
//   - Performance (perf.go, stats/): each series' latest run against a baseline window with
//     Mann-Whitney U and a minimum effect size; change points by a penalized step fit;
//     thresholds from Config (config.go).
//   - Flaky tests (flaky.go), acknowledgements and baseline resets (ack.go), the gate (gate.go).
//   - Views (views.go): the stable read-side types the dashboard renders.
//
// docs/reporter.md is the user documentation.
package report
