// Package golden holds Tessera's golden cases: a catalogue of small graphs over every op and
// every dtype the op accepts, with awkward shapes (1, primes, sizes that are not multiples of
// any default tile), and one golden file per (op, dtype) under data/ pinning the inputs, the
// outputs of the golden model (engine/ref) and the tolerance of each case.
//
// Index:
//   - Catalogue, Spec: the one list of cases (catalogue*.go, tolerance.go).
//   - DistCatalogue, DistPairs, Spec.World, Spec.RankInputs: the multi-rank cases of the
//     collective ops, each rank's inputs and ref.RunDist's outputs (catalogue_dist.go).
//   - Update: regenerate data/ from the catalogue and engine/ref (update.go).
//   - Verify: checksum, format version and staleness of every file (verify.go).
//   - Data, Load, LoadAll, LoadAllDist, Case: read golden files from the embedded data or a
//     directory (store.go, format.go; the format is described in docs/golden.md).
//   - CheckSpec, CheckProgram: run a golden case on a backend and compare with the stored
//     outputs (check.go); RunDigests: per-output digests for determinism checks.
//   - CheckDist: run a multi-rank case on in-process ranks (engine/dist/run) and compare every
//     rank's outputs (check_dist.go); CheckReference covers both kinds.
package golden
