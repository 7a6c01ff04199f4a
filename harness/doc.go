// Package harness is what every suite shares: cases, comparators, digests, the run
// environment, deterministic inputs, results and replay manifests (design.md §3).
//
// Index, one concern per file:
//
//	tolerance.go  Tolerance, DefaultTolerance, Bitwise, NoGuard, ForReduction (docs/tolerances.md)
//	check.go      Check(got, want, tol) CheckResult: structure, NaN/Inf positions, constant
//	              outputs, magnitude guard, allclose / ULP / bitwise, budget; CheckBound adds a
//	              per-element error bound (tensor-core accumulation, harness/accum)
//	digest.go     Digests, CombinedDigest, CombineDigests
//	env.go        Env, CaptureEnv
//	inputs.go     Dist, RandomTensor, RandomInputs, SubSeed: same seed, same bits, anywhere
//	case.go       Case, Runner, RunCase: compile, run, compare with engine/ref
//	result.go     Result, WriteResults, ReadResults (docs/results-json.md)
//	replay.go     Manifest, ManifestFor, WriteManifest, LoadManifest, Replay
//
// A typical spec:
//
//	in, _ := harness.RandomInputs(g, seed, nil)
//	c := harness.Case{Suite: "golden", Name: "matmul/f32/64", Graph: g, Inputs: in, Seed: seed,
//		Tolerances: []harness.Tolerance{harness.DefaultTolerance(numerics.F32).ForReduction(64)}}
//	r := harness.Runner{Backend: cpu, ArtifactsDir: dir}.Run(c)
//	// r.Verdict == "pass"; on failure r.Replay names a manifest for `tessera-qa replay`.
package harness
