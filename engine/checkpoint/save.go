package checkpoint

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// DefaultTimeout bounds each barrier wait of Save when Writer.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// Writer saves one rank's State. Every rank of a run has its own Writer with the same Dir,
// World, Layout and Keep, and all ranks call Save with the same Step.
type Writer struct {
	Dir    string
	Rank   int
	World  int
	Layout string // recorded in the manifest (how tensors are sharded); free-form

	// Barrier returns once every rank has called it (the same call on every rank, e.g.
	// dist.Comm.Barrier), or with an error when ctx ends first. Save calls it three times:
	// after checking whether the step is already committed, after this rank's file is in
	// place, and after rank 0 committed. It may be nil only when
	// World is 1. A Barrier that ignores ctx still cannot hold Save past the deadline.
	Barrier func(ctx context.Context) error

	// Keep is how many committed checkpoints to keep, the new one included; older ones are
	// removed by rank 0 right after a commit (a folder with a manifest counts, whether or not
	// its files still verify). Zero or less keeps all. Folders without a manifest older than
	// the new step are crashed saves and are always removed; newer ones are left alone.
	Keep int

	// Timeout bounds each barrier wait (ctx's own deadline still applies); zero means
	// DefaultTimeout.
	Timeout time.Duration

	// Now stamps Manifest.Created; nil means time.Now.
	Now func() time.Time
}

// Save writes st as this rank's part of checkpoint st.Step and takes part in the two-phase
// commit (see the package doc). It returns nil only once the step is committed. Errors name
// the step, the rank and the file; a barrier that times out is E_TIMEOUT, input Save cannot
// write back bit for bit is E_INPUT or E_DTYPE, a failed commit is E_CHECKPOINT. Saving a
// step that is already committed and intact is refused (E_INPUT): rewriting it in place would
// put it at risk; a committed step that fails verification may be saved again.
func (w *Writer) Save(ctx context.Context, st State) error {
	if err := w.checkWriter(); err != nil {
		return err
	}
	step := st.Step
	stepDir := filepath.Join(w.Dir, StepDirName(step))
	// A rank that fails locally still meets the others at every barrier, so that nobody waits
	// for it until the deadline: rank 0 then finds its file missing and does not commit.
	// Every rank decides from the same files whether the step is already committed: the
	// check reads only, and nobody writes before the barrier after it (found by chaos: when
	// a rank rewrote its file of a damaged step while the others were still checking, they
	// found the step intact again and refused, and the ranks' outcomes disagreed).
	localErr := w.checkStep(stepDir, st)
	if err := w.wait(ctx, step, "after checking "+StepDirName(step)); err != nil {
		return errors.Join(localErr, err)
	}
	if localErr == nil {
		localErr = w.writeStep(stepDir, st)
	}
	if err := w.wait(ctx, step, "after writing "+RankFileName(w.Rank)); err != nil {
		return errors.Join(localErr, err)
	}
	var commitErr, cleanErr error
	if w.Rank == 0 && localErr == nil {
		reached(phaseBarrierPassed, w.Rank)
		if commitErr = w.commit(stepDir, step); commitErr == nil {
			cleanErr = w.cleanup(stepDir, step)
		}
	}
	if err := w.wait(ctx, step, "after the commit"); err != nil {
		return errors.Join(localErr, commitErr, err)
	}
	switch {
	case localErr != nil:
		return localErr
	case commitErr != nil:
		return commitErr
	case cleanErr != nil:
		return errs.Wrap(errs.Checkpoint, cleanErr, "checkpoint step %d is committed, but removing old checkpoints failed", step)
	case w.Rank != 0:
		data, err := os.ReadFile(filepath.Join(stepDir, ManifestName))
		if err != nil {
			return errs.New(errs.Checkpoint, "checkpoint step %d: rank %d: rank 0 did not commit (see rank 0's error): %v", step, w.Rank, err)
		}
		if m, err := ParseManifest(data); err != nil || m.Step != step || m.World != w.World {
			return errs.New(errs.Checkpoint, "checkpoint step %d: rank %d: %s after the commit is not this step's manifest", step, w.Rank, ManifestName)
		}
	}
	return nil
}

// checkStep checks st and refuses to rewrite an intact commit of its step. It only reads, so
// every rank, checking before anyone writes, reaches the same decision.
func (w *Writer) checkStep(stepDir string, st State) error {
	step := st.Step
	if err := checkState(st); err != nil {
		return errs.Wrap(errs.Input, err, "checkpoint step %d: rank %d", step, w.Rank)
	}
	if _, err := os.Lstat(filepath.Join(stepDir, ManifestName)); err == nil {
		if v := verifyStep(stepDir, step, -1, false); v.Status == Committed {
			return errs.New(errs.Input, "checkpoint step %d: rank %d: already committed in %s; saving it again would rewrite it in place", step, w.Rank, stepDir)
		}
	}
	return nil
}

// writeStep is this rank's part before the commit barrier: remove a broken commit of the step
// (rank 0) and this rank's file of an earlier attempt, then write this rank's file.
func (w *Writer) writeStep(stepDir string, st State) error {
	step := st.Step
	fail := func(err error, format string, args ...any) error {
		return errs.Wrap(errs.Checkpoint, err, "checkpoint step %d: rank %d: "+format, append([]any{step, w.Rank}, args...)...)
	}
	manifest := filepath.Join(stepDir, ManifestName)
	if w.Rank == 0 { // checkStep found no intact commit: a manifest here is a broken one
		if err := os.Remove(manifest); err != nil && !os.IsNotExist(err) {
			return fail(err, "remove the broken %s", ManifestName)
		}
	}
	if err := os.MkdirAll(stepDir, 0o755); err != nil {
		return fail(err, "create %s", stepDir)
	}
	if err := syncDir(w.Dir); err != nil {
		return fail(err, "sync %s", w.Dir)
	}
	// A file of an earlier attempt at this step must not be committed if this attempt fails.
	if err := os.Remove(filepath.Join(stepDir, RankFileName(w.Rank))); err != nil && !os.IsNotExist(err) {
		return fail(err, "remove %s of an earlier attempt", RankFileName(w.Rank))
	}
	if err := w.writeOwn(stepDir, st); err != nil {
		// A write that fails (disk full, I/O error) is the checkpoint's failure, whatever
		// code the encoder gave it: it is not bad input (found by chaos's disk/full).
		return &errs.Error{Code: errs.Checkpoint, Msg: fmt.Sprintf("checkpoint step %d: rank %d: write %s: %v", step, w.Rank, RankFileName(w.Rank), err), Err: err}
	}
	reached(phaseRenamed, w.Rank)
	return nil
}

func (w *Writer) checkWriter() error {
	switch {
	case w.Dir == "":
		return errs.New(errs.Input, "checkpoint writer: empty Dir")
	case w.World < 1 || w.World > MaxWorld:
		return errs.New(errs.Input, "checkpoint writer: world %d (want 1..%d)", w.World, MaxWorld)
	case w.Rank < 0 || w.Rank >= w.World:
		return errs.New(errs.Input, "checkpoint writer: rank %d of world %d", w.Rank, w.World)
	case w.Barrier == nil && w.World > 1:
		return errs.New(errs.Input, "checkpoint writer: rank %d of world %d needs a Barrier", w.Rank, w.World)
	}
	return nil
}

// wait runs the barrier under ctx and Timeout. It returns at the deadline even when the
// Barrier ignores ctx (the Barrier's goroutine then ends whenever the Barrier does).
func (w *Writer) wait(ctx context.Context, step int, what string) error {
	if w.Barrier == nil {
		return nil
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Barrier(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		return nil
	}
	code := errs.Checkpoint
	if ctx.Err() != nil {
		code = errs.Timeout
	}
	return errs.Wrap(code, err, "checkpoint step %d: rank %d: barrier %s", step, w.Rank, what)
}

// writeOwn writes this rank's file to a temporary name, fsyncs it, renames it into place and
// fsyncs the folder.
func (w *Writer) writeOwn(stepDir string, st State) error {
	final := filepath.Join(stepDir, RankFileName(w.Rank))
	f, err := os.CreateTemp(stepDir, "."+RankFileName(w.Rank)+".tmp-*")
	if err != nil {
		return err
	}
	var total int64
	for _, t := range st.Tensors {
		total += int64(len(t.Data))
	}
	hw := &halfWriter{w: f, half: total / 2, rank: w.Rank}
	bw := bufio.NewWriterSize(hw, 1<<16)
	err = writeRankFile(bw, st, w.Rank, w.World)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		reached(phaseTempSynced, w.Rank)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), final)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	return syncDir(stepDir)
}

// halfWriter reports phaseTempHalf once half of the tensor bytes have reached the file.
type halfWriter struct {
	w       io.Writer
	n, half int64
	rank    int
	done    bool
}

func (h *halfWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	h.n += int64(n)
	if !h.done && h.half > 0 && h.n >= h.half {
		h.done = true
		reached(phaseTempHalf, h.rank)
	}
	return n, err
}

// commit (rank 0) reads every rank file back, checks that it parses as that rank's part of
// this step, and writes the manifest with its size and digest.
func (w *Writer) commit(stepDir string, step int) error {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	m := &Manifest{Format: FormatVersion, Step: step, World: w.World, Layout: w.Layout, Created: now().UTC()}
	for r := 0; r < w.World; r++ {
		name := RankFileName(r)
		data, err := os.ReadFile(filepath.Join(stepDir, name))
		if err != nil {
			return errs.Wrap(errs.Checkpoint, err, "checkpoint step %d: rank 0: commit: rank %d's %s", step, r, name)
		}
		if _, err := readRankFile(data, step, r, w.World); err != nil {
			return errs.Wrap(errs.Checkpoint, err, "checkpoint step %d: rank 0: commit: rank %d's %s", step, r, name)
		}
		sum := sha256.Sum256(data)
		m.Files = append(m.Files, File{Rank: r, Name: name, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	}
	js, err := m.encode()
	if err != nil {
		return err
	}
	if err := writeManifest(stepDir, js); err != nil {
		return errs.Wrap(errs.Checkpoint, err, "checkpoint step %d: rank 0: commit: write %s", step, ManifestName)
	}
	reached(phaseManifestRename, 0)
	return nil
}

// writeManifest is the commit point: temporary file, fsync, rename, fsync of the folder.
func writeManifest(stepDir string, js []byte) error {
	f, err := os.CreateTemp(stepDir, "."+ManifestName+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(js)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		reached(phaseManifestTemp, 0)
		err = os.Rename(f.Name(), filepath.Join(stepDir, ManifestName))
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	return syncDir(stepDir)
}

// cleanup (rank 0, after committing step) removes leftovers of crashed saves and the committed
// checkpoints beyond Keep. It touches nothing newer than step. A folder is first renamed to a
// ".trash-" name (atomic: it stops being a checkpoint at once), then deleted.
func (w *Writer) cleanup(stepDir string, step int) error {
	var errList []error
	// Inside the new step: temporary files and rank files of a larger earlier world.
	ents, err := os.ReadDir(stepDir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		stale := strings.HasPrefix(n, ".")
		if r, ok := rankOfFile(n); ok && r >= w.World {
			stale = true
		}
		if stale {
			if err := os.RemoveAll(filepath.Join(stepDir, n)); err != nil {
				errList = append(errList, err)
			}
		}
	}
	// Beside it: trash left by an earlier crash, pending folders of earlier steps, and
	// committed ones beyond Keep.
	top, err := os.ReadDir(w.Dir)
	if err != nil {
		return errors.Join(append(errList, err)...)
	}
	var committed []int
	dirs := map[int]string{}
	for _, e := range top {
		n := e.Name()
		if strings.HasPrefix(n, trashPrefix) {
			if err := os.RemoveAll(filepath.Join(w.Dir, n)); err != nil {
				errList = append(errList, err)
			}
			continue
		}
		s, ok := parseStepDir(n)
		if !ok || !e.IsDir() || s > step {
			continue
		}
		dirs[s] = n
		if _, err := os.Lstat(filepath.Join(w.Dir, n, ManifestName)); err == nil {
			committed = append(committed, s)
		} else if s < step {
			errList = append(errList, w.trash(n))
		}
	}
	if w.Keep > 0 {
		slices.Sort(committed)
		slices.Reverse(committed)
		for _, s := range committed[min(w.Keep, len(committed)):] {
			if s != step {
				errList = append(errList, w.trash(dirs[s]))
			}
		}
	}
	return errors.Join(errList...)
}

// rankOfFile returns r for a name RankFileName(r) would produce.
func rankOfFile(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "rank-")
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, ".npz")
	if !ok {
		return 0, false
	}
	r, err := strconv.Atoi(digits)
	return r, err == nil && r >= 0 && RankFileName(r) == name
}

// trash renames folder name of w.Dir to a dot name, makes that durable, and deletes it.
func (w *Writer) trash(name string) error {
	dst := filepath.Join(w.Dir, trashPrefix+name)
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(w.Dir, name), dst); err != nil {
		return err
	}
	if err := syncDir(w.Dir); err != nil {
		return err
	}
	return os.RemoveAll(dst)
}
