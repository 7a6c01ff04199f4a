package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	// ManifestName is the commit record inside a step folder.
	ManifestName = "manifest.json"
	stepPrefix   = "step-"
	trashPrefix  = ".trash-"
)

// StepDirName is the folder name of a step: "step-00000040" (wider past 8 digits).
func StepDirName(step int) string { return fmt.Sprintf("%s%08d", stepPrefix, step) }

// RankFileName is rank r's file inside a step folder: "rank-1.npz".
func RankFileName(rank int) string { return fmt.Sprintf("rank-%d.npz", rank) }

// parseStepDir returns the step of a folder name that StepDirName would produce, and false
// for anything else ("step-40", "step-x", ".trash-step-00000040", "step--0000001").
func parseStepDir(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, stepPrefix)
	if !ok || digits == "" || digits[0] < '0' || digits[0] > '9' {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || StepDirName(n) != name {
		return 0, false
	}
	return n, true
}

// stepDirs lists the step folders of dir by step, in no particular order. A missing dir is
// an empty list.
func stepDirs(dir string) (map[int]string, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if step, ok := parseStepDir(e.Name()); ok {
			out[step] = filepath.Join(dir, e.Name())
		}
	}
	return out, nil
}

// syncDir fsyncs a directory so that the names created, renamed or removed in it survive a
// power loss, not only a process crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
