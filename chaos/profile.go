package chaos

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/profiling"
)

// AttemptProfile is one attempt's profile: its trace (Perfetto opens it), the per-rank
// summary with the straggler ranking, and what could not be merged.
type AttemptProfile struct {
	Attempt int                     `json:"attempt"`
	Trace   string                  `json:"trace,omitempty"`
	Slices  int                     `json:"slices,omitempty"`
	Ranks   []profiling.RankSummary `json:"ranks,omitempty"`
	Error   string                  `json:"error,omitempty"`
}

// profileDir is where attempt's ranks write their records.
func profileDir(artifacts string, attempt int) string {
	return filepath.Join(artifacts, "profile", "attempt-"+strconv.Itoa(attempt))
}

// mergeProfiles turns every attempt's rank records into dir/profile/attempt-N/chaos.trace.json
// (validated) and a summary.txt, and says so in rep's warnings where it cannot. A rank whose
// process was killed writes no record (records are written when a rank finishes), so an
// attempt a fault ended holds the ranks that got to the end of it, if any.
func mergeProfiles(dir string, rep *Report) []AttemptProfile {
	var out []AttemptProfile
	for a := 0; a < max(rep.Attempts, 1); a++ {
		pd := profileDir(dir, a)
		ap := AttemptProfile{Attempt: a}
		ranks, origin, err := profiling.LoadRanks(pd)
		if err != nil {
			if _, statErr := os.Stat(pd); statErr != nil && a+1 < rep.Attempts {
				continue // a failed attempt's ranks ended before writing anything
			}
			ap.Error = err.Error()
			out = append(out, ap)
			continue
		}
		ap.Trace = filepath.Join(pd, "chaos.trace.json")
		if err := profiling.RankTrace(origin, ranks).WriteFile(ap.Trace); err != nil {
			ap.Error = err.Error()
		} else if st, err := profiling.ValidateFile(ap.Trace); err != nil {
			ap.Error = "the trace is invalid: " + err.Error()
		} else {
			ap.Slices = st.Slices
		}
		ap.Ranks = profiling.Summarize(ranks)
		var b bytes.Buffer
		fmt.Fprintf(&b, "attempt %d: %d ranks, trace %s\n", a, len(ranks), ap.Trace)
		profiling.WriteRankSummary(&b, ap.Ranks)
		os.WriteFile(filepath.Join(pd, "summary.txt"), b.Bytes(), 0o644)
		if ap.Error != "" {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("profile of attempt %d: %s", a, strings.TrimSpace(ap.Error)))
		}
		out = append(out, ap)
	}
	return out
}
