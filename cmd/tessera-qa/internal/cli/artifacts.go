package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// runFolderName is the name a run's own artifacts folder gets: UTC time to the second and the
// process id, as `run`, `chaos` and `stress` name theirs by default.
func runFolderName() string {
	return time.Now().UTC().Format("20060102-150405") + "-" + strconv.Itoa(os.Getpid())
}

// freshArtifacts keeps a rerun in an explicit artifacts folder from meeting the earlier run
// (issue 21): when dir already holds a run (any of marks, globs under dir, matches), this run
// goes into dir/TIME-PID and says so on w; the earlier run's files are neither overwritten
// nor removed. A folder without a run is used as given.
func freshArtifacts(w io.Writer, verb, dir string, marks ...string) string {
	for _, m := range marks {
		if hits, _ := filepath.Glob(filepath.Join(dir, m)); len(hits) > 0 {
			fresh := filepath.Join(dir, runFolderName())
			fmt.Fprintf(w, "%s: %s holds an earlier run (kept); this run's artifacts go to %s\n", verb, dir, fresh)
			return fresh
		}
	}
	return dir
}
