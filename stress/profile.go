package stress

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/profile"
	"github.com/tessera-qa/tessera-qa/profiling"
)

// ProfiledRuns bounds a job's profile: a CPU job runs thousands of graphs a second, and the
// first runs under load already show how the jobs' kernels interleave.
const ProfiledRuns = 64

// jobProfile records one job's first ProfiledRuns graph runs (their kernels, each run a
// step) and writes them as the job's rank record; nil when the run is not profiled.
type jobProfile struct {
	dir   string
	job   int
	rec   profiling.Recorder
	steps []profiling.StepSpan
}

func newJobProfile(o JobOptions) *jobProfile {
	if o.ProfileDir == "" {
		return nil
	}
	return &jobProfile{dir: o.ProfileDir, job: o.Job}
}

// sink is where the next run reports, nil once the profile is full.
func (p *jobProfile) sink() profile.Sink {
	if p == nil || len(p.steps) >= ProfiledRuns {
		return nil
	}
	return &p.rec
}

func (p *jobProfile) ran(start time.Time) {
	if p == nil || len(p.steps) >= ProfiledRuns {
		return
	}
	p.steps = append(p.steps, profiling.StepSpan{Step: len(p.steps) + 1, Start: start, Dur: time.Since(start)})
}

func (p *jobProfile) write() {
	if p == nil {
		return
	}
	launches, _ := p.rec.Take()
	profiling.WriteRankRecord(p.dir, profiling.RankRecord{Rank: p.job, Steps: p.steps, Launches: launches})
}

// mergeProfile writes the jobs' records in dir as one trace, a process per job, and returns
// its path and slice count.
func mergeProfile(dir string) (string, int, error) {
	jobs, origin, err := profiling.LoadRanks(dir)
	if err != nil {
		return "", 0, err
	}
	for i := range jobs {
		jobs[i].Name = fmt.Sprintf("job %d", jobs[i].Rank)
	}
	path := filepath.Join(dir, "stress.trace.json")
	if err := profiling.RankTrace(origin, jobs).WriteFile(path); err != nil {
		return "", 0, err
	}
	st, err := profiling.ValidateFile(path)
	if err != nil {
		return path, 0, err
	}
	return path, st.Slices, nil
}
