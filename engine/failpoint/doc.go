// Package failpoint plants named faults in the engine for the mutation check (`tessera-qa
// mutate`, package mutate): a fault is a realistic bug in the compiler or a backend, switched on
// by name at a hook in the real code path.
//
// Like etcd's gofail, faults exist only in binaries built with `-tags failpoints`. In every
// other build Enabled is a constant false (off.go), so the compiler deletes the faulty branch
// at each hook and a normal binary cannot contain, let alone activate, a fault. In a
// failpoints build (on.go) faults are switched on per process by the environment,
// TESSERA_FAILPOINTS=name1,name2, read once at start-up, or in-process with Activate.
//
// Hooks are one line at the site of the bug, through three helpers (hooks.go):
//
//	acc := failpoint.Pick(failpoint.MatmulAccumBF16, accumDType(n), numerics.BF16)
//	if n.BoolAttr("transpose_b") && !failpoint.Enabled(failpoint.MatmulTransposeBIgnored) {
//	row = failpoint.Apply(failpoint.ReduceRightToLeft, row, reversed)
//
// Pick's faulty value is evaluated even when the fault is off, so it must be a constant or a
// cheap expression without side effects; Apply computes it only when the fault is on.
//
// Index: names.go (the fault names and EnvVar), hooks.go (Pick, Apply), off.go / on.go
// (Compiled, Enabled, Activate, Active in normal and failpoints builds).
package failpoint
