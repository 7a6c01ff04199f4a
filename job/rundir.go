package job

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/atomicfile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Every run gets a folder of its own under OutDir/runs, so a second run in the same folder
// never meets the first one's chaos histories, checkpoints, stress files or replay manifests
// (issue 21: the chaos checker refused a folder that already held a run), and the paths the
// results store keeps (replay manifests, artifacts) stay valid after later runs. OutDir itself
// keeps results.json and junit.xml of the latest run, where CI looks, and results.db.
const (
	// RunsDir is the folder under OutDir holding one folder per run.
	RunsDir = "runs"
	// runMarker marks a folder the job made; only such folders are ever pruned.
	runMarker = ".tessera-qa-run"
)

// newRunDir makes OutDir/runs/TIME-PID (TIME in UTC, to the second), with -2, -3 ... when a
// run of the same process already took that name within the second.
func newRunDir(out string, now time.Time) (string, error) {
	root := filepath.Join(out, RunsDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", errs.New(errs.Input, "output directory %s: %v", out, err)
	}
	base := now.UTC().Format("20060102-150405") + "-" + strconv.Itoa(os.Getpid())
	for i := 1; i < 1000; i++ {
		name := base
		if i > 1 {
			name += "-" + strconv.Itoa(i)
		}
		dir := filepath.Join(root, name)
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", errs.New(errs.Input, "run folder %s: %v", dir, err)
		}
		if err := os.WriteFile(filepath.Join(dir, runMarker), []byte("made by tessera-qa run; pruned by --keep\n"), 0o644); err != nil {
			return "", errs.New(errs.Input, "run folder %s: %v", dir, err)
		}
		return dir, nil
	}
	return "", errs.New(errs.Input, "run folder: 999 runs named %s in %s already", base, root)
}

// pruneRuns removes the oldest run folders under out/runs beyond the newest keep, never
// current, and only folders carrying the job's marker (anything else in runs/ is the
// user's). keep <= 0 keeps every run. It returns what it removed.
func pruneRuns(out string, keep int, current string) ([]string, error) {
	if keep <= 0 {
		return nil, nil
	}
	root := filepath.Join(out, RunsDir)
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, errs.New(errs.Input, "prune %s: %v", root, err)
	}
	var ours []string
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() || dir == current {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, runMarker)); err == nil {
			ours = append(ours, dir)
		}
	}
	// Names start with the UTC time, so name order is age order.
	sort.Strings(ours)
	var removed []string
	for len(ours) > keep-1 {
		if err := os.RemoveAll(ours[0]); err != nil {
			return removed, errs.New(errs.Input, "prune old run %s: %v", ours[0], err)
		}
		removed = append(removed, ours[0])
		ours = ours[1:]
	}
	return removed, nil
}

// copyFile copies src to dst whole (atomicfile), so a reader of dst never sees half of it.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return errs.New(errs.Input, "copy %s: %v", src, err)
	}
	if err := atomicfile.Write(dst, b); err != nil {
		return errs.New(errs.Input, "write %s: %v", dst, err)
	}
	return nil
}
