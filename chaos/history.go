package chaos

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Kind says what an Event records.
type Kind string

const (
	KindScenario   Kind = "scenario"   // the agent: the run begins (Detail: the scenario's name)
	KindRankStart  Kind = "rank_start" // the agent: a rank's process started (PID)
	KindRankExit   Kind = "rank_exit"  // the agent: a rank's process ended (Code: its exit, Detail: how)
	KindResume     Kind = "resume"     // a rank: the checkpoint it starts from (Step; 0 for a fresh start)
	KindStep       Kind = "step"       // a rank: step Step was applied to its parameters (Bits: the loss)
	KindCheckpoint Kind = "checkpoint" // a rank: checkpoint Step is committed
	KindInject     Kind = "inject"     // a fault began (Fault, Name, Rank: where; Step: that rank's last step)
	KindHeal       Kind = "heal"       // a fault's undo ran
	KindDetect     Kind = "detect"     // a rank saw a failure: Code and Detail are its error (or a loader notice); E_STRAGGLER: the agent's straggler watch names Rank
	KindRestart    Kind = "restart"    // the launcher restarts the group (Attempt: the new attempt)
	KindGiveUp     Kind = "give_up"    // the launcher gives up (no restart left)
	KindDone       Kind = "done"       // rank 0 finished every step (Digest)
	KindJobEnd     Kind = "job_end"    // the agent: the job ended (Code: exit; Detail: "timeout" when it hung)
)

// Event is one line of a history. Every process of a run stamps its events with the host's
// wall clock, so the events of all ranks and the agent sit on one clock (on one host; a
// cluster's hosts are as close as their clocks).
type Event struct {
	T       time.Time `json:"t"`
	Kind    Kind      `json:"kind"`
	Attempt int       `json:"attempt"`
	Rank    int       `json:"rank"` // -1: the agent
	Step    int       `json:"step,omitempty"`
	Fault   string    `json:"fault,omitempty"` // the injection's id (f0, f1 ...)
	Name    string    `json:"name,omitempty"`  // the fault's kind (rank/kill ...)
	Code    string    `json:"code,omitempty"`  // an error code (detect), or an exit code (rank_exit, job_end)
	Detail  string    `json:"detail,omitempty"`
	Field   string    `json:"field,omitempty"`   // detect: the frame header field an E_DESYNC names (dist.DesyncField)
	Bits    string    `json:"bits,omitempty"`    // step: the loss's bits
	Damaged int       `json:"damaged,omitempty"` // inject: the committed checkpoint step the fault made unusable
	PID     int       `json:"pid,omitempty"`
	Digest  string    `json:"digest,omitempty"` // done: the final parameters' digest
	// ComputeMS is a step's wall time outside collectives (the straggler watch's signal).
	ComputeMS float64 `json:"compute_ms,omitempty"`
	// WaitUS is, by peer rank, how long the step's collectives waited on each peer's frames
	// in microseconds (dist.Comm.WaitedOn: the wall clock, or the fabric's in virtual time):
	// the straggler watch's signal of a slow link or a congested switch.
	WaitUS []float64 `json:"wait_us,omitempty"`
}

// HistoryFile is the merged history in a run's artifacts folder; the writers' own files are
// history-*.jsonl beside it.
const HistoryFile = "history.jsonl"

// Recorder appends events to one JSON-lines file, one write per event, each line flushed
// before Record returns (a process killed right after an event still leaves it).
type Recorder struct {
	mu   sync.Mutex
	f    *os.File
	path string
	sink func(Event) // also told of every event (the agent's triggers)
}

// NewRecorder creates (or appends to) path.
func NewRecorder(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, errs.New(errs.Input, "chaos: history %s: %v", path, err)
	}
	return &Recorder{f: f, path: path}, nil
}

// Path is the file the recorder writes.
func (r *Recorder) Path() string { return r.path }

// Record stamps e (when its time is zero) and appends it.
func (r *Recorder) Record(e Event) Event {
	if e.T.IsZero() {
		e.T = time.Now()
	}
	line, _ := json.Marshal(e)
	r.mu.Lock()
	r.f.Write(append(line, '\n'))
	sink := r.sink
	r.mu.Unlock()
	if sink != nil {
		sink(e)
	}
	return e
}

// Close closes the file.
func (r *Recorder) Close() error { return r.f.Close() }

// ReadEvents reads one JSON-lines file; a torn last line (a writer killed mid-write) is
// skipped.
func ReadEvents(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errs.New(errs.Input, "chaos: history %s: %v", path, err)
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Kind != "" {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// ReadHistory reads every history-*.jsonl of a run's folder and merges them on the clock.
func ReadHistory(dir string) ([]Event, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "history-*.jsonl"))
	if len(files) == 0 {
		return nil, errs.New(errs.Input, "chaos: no history-*.jsonl in %s", dir)
	}
	var all []Event
	for _, f := range files {
		evs, err := ReadEvents(f)
		if err != nil {
			return nil, err
		}
		all = append(all, evs...)
	}
	SortEvents(all)
	return all, nil
}

// SortEvents orders events by time; ties keep a causal order (a step before the checkpoint
// of it, an injection before what it caused).
func SortEvents(evs []Event) {
	slices.SortStableFunc(evs, func(a, b Event) int { return a.T.Compare(b.T) })
}

// WriteHistory writes evs as one JSON-lines file (the merged history.jsonl).
func WriteHistory(path string, evs []Event) error {
	var b strings.Builder
	for _, e := range evs {
		line, _ := json.Marshal(e)
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return errs.New(errs.Input, "chaos: writing %s: %v", path, err)
	}
	return nil
}
