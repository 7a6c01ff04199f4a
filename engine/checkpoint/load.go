package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Status is what a step folder holds.
type Status string

const (
	Committed Status = "committed" // manifest valid, every file present with its size and digest
	Torn      Status = "torn"      // manifest valid, but a rank file is missing or has another size
	Corrupt   Status = "corrupt"   // manifest unreadable or invalid, a digest differs, or a file does not parse
	Pending   Status = "pending"   // no manifest: a save in progress or one that crashed; never loaded
)

// Info describes one step folder for a listing.
type Info struct {
	Step     int
	Path     string
	Status   Status
	Reason   string    // why it is not Committed, naming the file; "" when Committed
	Manifest *Manifest // nil when missing or unreadable
}

// Loaded is what LoadLatest and Load return.
type Loaded struct {
	State    State
	Manifest *Manifest
	Notices  []string // one per newer checkpoint that was skipped, saying why and where it fell back to
}

// List returns every step folder of dir, oldest first, with its status. It reads every rank
// file in full (digest and parse), so it is as thorough as a load by every rank. A missing
// dir is an empty list.
func List(dir string) ([]Info, error) {
	dirs, err := stepDirs(dir)
	if err != nil {
		return nil, errs.New(errs.Checkpoint, "list checkpoints in %s: %v", dir, err)
	}
	steps := sortedSteps(dirs)
	out := make([]Info, 0, len(steps))
	for _, s := range steps {
		v := verifyStep(dirs[s], s, -1, true)
		out = append(out, Info{Step: s, Path: dirs[s], Status: v.Status, Reason: v.Reason, Manifest: v.Manifest})
	}
	return out, nil
}

// LoadLatest returns this rank's State from the newest committed checkpoint in dir that
// verifies, with a notice for every newer one it skipped. It returns (nil, nil) when dir holds
// no manifest at all (missing, empty, or only saves that crashed before their first commit):
// a fresh start. When manifests exist but none verifies, the error is E_CHECKPOINT and lists
// every step's reason. A checkpoint saved by another world size is an E_CHECKPOINT error, not
// a fallback (see the package doc).
func LoadLatest(dir string, rank, world int) (*Loaded, error) {
	if err := checkRank(rank, world); err != nil {
		return nil, err
	}
	dirs, err := stepDirs(dir)
	if err != nil {
		return nil, errs.New(errs.Checkpoint, "load checkpoint from %s: %v", dir, err)
	}
	var cands []int // steps with a manifest, newest first
	for _, s := range sortedSteps(dirs) {
		if _, err := os.Lstat(filepath.Join(dirs[s], ManifestName)); err == nil {
			cands = append(cands, s)
		}
	}
	slices.Reverse(cands)
	if len(cands) == 0 {
		return nil, nil
	}
	var failures []string
	for _, s := range cands {
		v := verifyStep(dirs[s], s, rank, false)
		if v.Manifest != nil && v.Manifest.World != world {
			return nil, errs.New(errs.Checkpoint, "checkpoint step %d in %s was saved by %d ranks, this run has %d (resharding is not supported)%s",
				s, dir, v.Manifest.World, world, joinSkipped(failures))
		}
		if v.Status != Committed {
			failures = append(failures, fmt.Sprintf("checkpoint step %d: %s", s, v.Reason))
			continue
		}
		notices := make([]string, len(failures))
		for i, f := range failures {
			notices[i] = fmt.Sprintf("%s; falling back to step %d", f, cands[i+1])
		}
		return &Loaded{State: v.State, Manifest: v.Manifest, Notices: notices}, nil
	}
	return nil, errs.New(errs.Checkpoint, "no loadable checkpoint in %s: %s", dir, strings.Join(failures, "; "))
}

// Load returns this rank's State of one given step, verified like LoadLatest does, without
// falling back. A missing or uncommitted step is an E_CHECKPOINT error.
func Load(dir string, step, rank, world int) (*Loaded, error) {
	if err := checkRank(rank, world); err != nil {
		return nil, err
	}
	stepDir := filepath.Join(dir, StepDirName(step))
	if info, err := os.Stat(stepDir); err != nil || !info.IsDir() || step < 0 {
		return nil, errs.New(errs.Checkpoint, "checkpoint step %d: no folder %s", step, stepDir)
	}
	v := verifyStep(stepDir, step, rank, false)
	if v.Manifest != nil && v.Manifest.World != world {
		return nil, errs.New(errs.Checkpoint, "checkpoint step %d in %s was saved by %d ranks, this run has %d (resharding is not supported)",
			step, dir, v.Manifest.World, world)
	}
	if v.Status != Committed {
		return nil, errs.New(errs.Checkpoint, "checkpoint step %d (%s): %s", step, v.Status, v.Reason)
	}
	return &Loaded{State: v.State, Manifest: v.Manifest}, nil
}

func checkRank(rank, world int) error {
	if world < 1 || world > MaxWorld || rank < 0 || rank >= world {
		return errs.New(errs.Input, "checkpoint load: rank %d of world %d", rank, world)
	}
	return nil
}

func joinSkipped(failures []string) string {
	if len(failures) == 0 {
		return ""
	}
	return "; newer ones skipped: " + strings.Join(failures, "; ")
}

func sortedSteps(dirs map[int]string) []int {
	steps := make([]int, 0, len(dirs))
	for s := range dirs {
		steps = append(steps, s)
	}
	slices.Sort(steps)
	return steps
}

// verdict is what verifyStep found. State is set only for the rank asked for, when Committed.
type verdict struct {
	Status   Status
	Reason   string
	Manifest *Manifest
	State    State
}

// verifyStep checks one step folder: its manifest, then every rank file's presence, size and
// SHA-256. The file of rank own (if >= 0) is read once, checked and parsed into State; with
// parseAll every file is parsed. Every rank checks every file so that all ranks reach the same
// verdict without talking.
func verifyStep(stepDir string, step, own int, parseAll bool) verdict {
	data, err := readManifestFile(filepath.Join(stepDir, ManifestName))
	if os.IsNotExist(err) {
		return verdict{Status: Pending, Reason: "no " + ManifestName + " (a save in progress, or one that crashed before its commit)"}
	}
	if err != nil {
		return verdict{Status: Corrupt, Reason: fmt.Sprintf("%s: %v", ManifestName, err)}
	}
	m, err := ParseManifest(data)
	if err != nil {
		return verdict{Status: Corrupt, Reason: ManifestName + ": " + strings.TrimPrefix(msgOf(err), "manifest: ")}
	}
	if m.Step != step {
		return verdict{Status: Corrupt, Reason: fmt.Sprintf("%s: says step %d", ManifestName, m.Step)}
	}
	v := verdict{Status: Committed, Manifest: m}
	if own >= m.World { // the caller reports the world mismatch
		return verdict{Status: Corrupt, Reason: fmt.Sprintf("%s: world %d has no rank %d", ManifestName, m.World, own), Manifest: m}
	}
	for _, f := range m.Files {
		st, status, reason := checkFile(stepDir, m, f, f.Rank == own || parseAll)
		if status != Committed {
			return verdict{Status: status, Reason: f.Name + ": " + reason, Manifest: m}
		}
		if f.Rank == own {
			v.State = st
		}
	}
	return v
}

// checkFile checks one rank file against the manifest; with parse, it also parses it.
func checkFile(stepDir string, m *Manifest, f File, parse bool) (State, Status, string) {
	fh, err := os.Open(filepath.Join(stepDir, f.Name))
	if os.IsNotExist(err) {
		return State{}, Torn, "missing"
	}
	if err != nil {
		return State{}, Corrupt, err.Error()
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return State{}, Corrupt, err.Error()
	}
	if !info.Mode().IsRegular() {
		return State{}, Corrupt, "not a regular file"
	}
	if info.Size() != f.Bytes {
		return State{}, Torn, fmt.Sprintf("%d bytes, the manifest says %d (torn or truncated)", info.Size(), f.Bytes)
	}
	h := sha256.New()
	var data []byte
	if parse {
		// Read once: the bytes that are hashed are the bytes that are parsed.
		data = make([]byte, f.Bytes)
		if _, err := io.ReadFull(fh, data); err != nil {
			return State{}, Torn, fmt.Sprintf("read: %v", err)
		}
		h.Write(data)
	} else if n, err := io.Copy(h, fh); err != nil || n != f.Bytes {
		return State{}, Torn, fmt.Sprintf("read %d of %d bytes: %v", n, f.Bytes, err)
	}
	if hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return State{}, Corrupt, "sha256 mismatch (torn or corrupted)"
	}
	if !parse {
		return State{}, Committed, ""
	}
	st, err := readRankFile(data, m.Step, f.Rank, m.World)
	if err != nil {
		return State{}, Corrupt, msgOf(err)
	}
	return st, Committed, ""
}

// msgOf is an error's message without its code, for reasons that go inside another message.
func msgOf(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return err.Error()
}

func readManifestFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	return data, nil
}
