// Package doctor judges whether a node can be trusted, in levels as NVIDIA DCGM's diagnostics
// are (r1 to r4): level 1 software, deployment and NVML's health fields (seconds); level 2 a
// device memory test in our own kernels, copy bandwidth against the SKU's threshold and the
// known-answer (SDC) scan; level 3 burn-in under load with temperatures and clocks watched and
// the known-answer scan repeated under load; level 4 long memory test and soak.
//
// Every check ends pass, warn, fail or skipped with its reason: could not run is never a pass
// or a fail. Thresholds are per SKU (H100, H200, CPU) in one versioned file (thresholds.json,
// embedded; --thresholds overrides it). The report's JSON schema is docs/health.md's.
//
// Index: verdict.go (Verdict, Check, Report), thresholds.go (Thresholds, SKU, ParseThresholds),
// nvml.go (judging mig.Health), software.go (level 1's deployment checks), sdc.go (the
// known-answer scan against golden/pins, E_SDC), memtest.go (pattern tests), bandwidth.go,
// burn.go (level 3 and 4), run.go (Run: which checks a level runs on which device).
package doctor
