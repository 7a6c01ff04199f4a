// Package checkpoint saves and restores a training run's per-rank state so that a crash at any
// moment leaves the newest committed checkpoint loadable.
//
// # On disk
//
// All ranks share one directory:
//
//	DIR/step-00000040/rank-0.npz      rank 0's State (tensors + a "__checkpoint__" entry)
//	DIR/step-00000040/rank-1.npz
//	DIR/step-00000040/manifest.json   the commit record: world, layout, size and SHA-256 of every rank file
//
// A step folder is a checkpoint only once its manifest.json exists (Committed); a folder without
// one is a save in progress or one that crashed (Pending) and is never loaded. Names that start
// with "." (temporary files, folders being deleted) are never read.
//
// A rank file is an ordinary .npz (engine/tensor) that np.load can open. Because .npz cannot tell
// f16 from bf16 (both '<u2') or the two fp8 formats apart (both '|u1'), every rank file also holds
// a "__checkpoint__" entry: JSON (as int8 bytes) with the step, rank, world, RNG words, Meta and
// the dtype and shape of every tensor. Tensors therefore round-trip bit for bit for every dtype.
//
// # Saving: two-phase commit (Writer.Save)
//
//  1. Every rank writes its .npz to a temporary file in the step folder, fsyncs it, renames it
//     to rank-R.npz and fsyncs the folder.
//  2. All ranks meet at Writer.Barrier (bounded by ctx and Writer.Timeout).
//  3. Rank 0 reads every rank file back (it must parse), computes its SHA-256 and writes
//     manifest.json by temporary file + fsync + rename + fsync of the folder. That rename is
//     the commit.
//  4. Rank 0 removes garbage (temporary files, pending folders of earlier steps) and committed
//     checkpoints beyond Writer.Keep, oldest first, each by renaming it to a dot name first so
//     that a crash mid-delete never leaves a half-deleted checkpoint that looks committed.
//  5. All ranks meet at the barrier again; ranks other than 0 then check that the manifest of
//     this step exists, so Save returns nil on a rank only when the step is committed.
//
// A crash before the rename in step 3 leaves the step Pending and the previous checkpoint the
// newest committed one; after it, the new step is committed. A rank that fails on its own
// (bad State, disk full) still meets the others at both barriers, so nobody waits for it until
// the deadline: rank 0 then finds its file missing and does not commit, and every rank's Save
// returns an error. Each barrier wait is bounded by ctx and Writer.Timeout (E_TIMEOUT).
//
// Memory: rank 0 reads one rank file at a time into memory at commit, and a loading rank reads
// its own file into memory (the bytes it hashes are the bytes it parses); other ranks' files are
// streamed through SHA-256.
//
// # Loading (LoadLatest, Load, List)
//
// LoadLatest tries committed steps newest first. Every rank verifies every rank file of a
// step (present, size and SHA-256 as in the manifest), not only its own, so that all ranks pick
// the same step without talking to each other; it then parses its own file and checks its step,
// rank and world against the manifest. A step that fails is skipped with a notice such as
//
//	checkpoint step 40: rank-1.npz: sha256 mismatch (torn or corrupted); falling back to step 30
//
// A directory without any manifest (missing, empty, or only crashed first saves) is a fresh
// start: LoadLatest returns (nil, nil). When manifests exist but none verifies, the result is
// an E_CHECKPOINT error that lists every step's reason. A
// manifest whose world differs from the caller's is an E_CHECKPOINT error straight away, not a
// fallback: resharding is not supported and silently rolling back past it would lose work.
//
// # Index
//
// layout.go (StepDirName, RankFileName, ManifestName, directory fsync), manifest.go (Manifest,
// File, ParseManifest, FormatVersion, MaxWorld), rankfile.go (State <-> .npz), save.go (Writer,
// Save, DefaultTimeout, commit, cleanup), load.go (LoadLatest, Load, Loaded, List, Info,
// Status), hooks.go (the crash phases and the hook the SIGKILL tests kill at).
//
// Tests: save_test.go (round trips, goroutine ranks, barriers, garbage), corrupt_test.go
// (fallbacks and notices), crash_test.go (a re-executed child SIGKILLed at every phase of
// Save), fuzz_test.go (FuzzManifest, FuzzRankFile).
package checkpoint
