package checkpoint

// Crash phases of Save, in order. The SIGKILL tests kill a child process at each one.
const (
	phaseTempHalf       = "rank-temp-half"        // half of a rank's tensor bytes are in its temporary file
	phaseTempSynced     = "rank-temp-synced"      // the temporary file is complete and fsynced, not yet renamed
	phaseRenamed        = "rank-renamed"          // rank-R.npz is in place; the rank has not reached the barrier
	phaseBarrierPassed  = "commit-barrier-passed" // rank 0 passed the barrier, no manifest yet
	phaseManifestTemp   = "manifest-temp-synced"  // the manifest's temporary file is fsynced, not yet renamed
	phaseManifestRename = "manifest-renamed"      // manifest.json is in place (committed), before cleanup
)

// crashHook, when set, is called at each phase with the rank that reached it. Only tests set
// it (the helper process of the SIGKILL tests); it is nil in every real run.
var crashHook func(phase string, rank int)

func reached(phase string, rank int) {
	if crashHook != nil {
		crashHook(phase, rank)
	}
}
