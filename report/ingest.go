package report

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/report/parse"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// Meta is what an ingest records about a run besides the file's rows.
type Meta struct {
	Commit, Branch, Event, Machine, DeviceClass string
	// Env adds to the run's env (merged over what the file says).
	Env  map[string]string
	Time time.Time
}

// IngestOptions: Override wins over what the file says; the file wins over Fallback (CI
// variables, git). Fields left empty everywhere become "unknown" (time: now).
type IngestOptions struct {
	Override, Fallback Meta
	// Progress, when set, is called inside the transaction after each batch of rows.
	Progress func(rows int)
}

// IngestResult says what one file became.
type IngestResult struct {
	Source string `json:"source"`
	Kind   string `json:"kind"` // "results", "ginkgo", "bench", "collectives"
	RunID  int64  `json:"run_id"`
	Rows   int    `json:"rows"`
	// Duplicate: the same bytes with the same run metadata were ingested before, as RunID.
	Duplicate bool `json:"duplicate"`
}

// IngestFile reads, validates and writes one file as one run. A file that fails validation
// writes nothing.
func (db *DB) IngestFile(ctx context.Context, path string, o IngestOptions) (IngestResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return IngestResult{}, errs.New(errs.Input, "report %s: %v", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, parse.MaxFileBytes+1))
	if err != nil {
		return IngestResult{}, errs.New(errs.Input, "report %s: %v", path, err)
	}
	if len(data) > parse.MaxFileBytes {
		return IngestResult{}, errs.New(errs.Input, "report %s: larger than %d bytes", path, parse.MaxFileBytes)
	}
	return db.IngestBytes(ctx, path, data, o)
}

// IngestBytes is IngestFile for bytes already read; name is the source recorded.
func (db *DB) IngestBytes(ctx context.Context, name string, data []byte, o IngestOptions) (IngestResult, error) {
	p, err := parse.Parse(name, data)
	if err != nil {
		return IngestResult{}, err
	}
	return db.ingestParsed(ctx, name, p, data, o)
}

// IngestRun stores one run of `tessera-qa run` as one run of the store: its results file
// (every verdict, and the run's metadata) together with the measurement files it wrote beside
// it (chaos, stress, collectives and bench JSON). Each file is read and validated as
// IngestFile does; of a measurement file only the metrics and bench rows are kept, since its
// verdicts are already in the results file (as the job's cases), and keeping both would
// count each scenario, workload and collective twice. Nothing is written if any file fails
// validation.
func (db *DB) IngestRun(ctx context.Context, results string, measurements []string, o IngestOptions) (IngestResult, error) {
	p, data, err := parseRun(results, measurements)
	if err != nil {
		return IngestResult{}, err
	}
	return db.ingestParsed(ctx, results, p, data, o)
}

// CheckRun validates a run's files as IngestRun reads them, without a store, and says what it
// would ingest.
func CheckRun(results string, measurements []string) (IngestResult, error) {
	p, _, err := parseRun(results, measurements)
	if err != nil {
		return IngestResult{}, err
	}
	return IngestResult{Source: results, Kind: p.Kind, Rows: p.Batch.Rows()}, nil
}

// parseRun reads and merges a run's files (IngestRun); the bytes returned identify the run.
func parseRun(results string, measurements []string) (*parse.Report, []byte, error) {
	read := func(path string) (*parse.Report, []byte, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, errs.New(errs.Input, "report %s: %v", path, err)
		}
		if len(data) > parse.MaxFileBytes {
			return nil, nil, errs.New(errs.Input, "report %s: larger than %d bytes", path, parse.MaxFileBytes)
		}
		p, err := parse.Parse(path, data)
		return p, data, err
	}
	p, data, err := read(results)
	if err != nil {
		return nil, nil, err
	}
	if p.Kind != "results" {
		return nil, nil, errs.New(errs.Input, "report %s: a %s report, not the results file of a run", results, p.Kind)
	}
	all := append([]byte(nil), data...)
	for _, path := range measurements {
		m, mdata, err := read(path)
		if err != nil {
			return nil, nil, err
		}
		p.Batch.Metrics = append(p.Batch.Metrics, m.Batch.Metrics...)
		p.Batch.Bench = append(p.Batch.Bench, m.Batch.Bench...)
		all = append(append(all, 0), mdata...)
	}
	return p, all, nil
}

// ingestParsed writes a validated report as one run; data (the bytes read) identify it.
func (db *DB) ingestParsed(ctx context.Context, name string, p *parse.Report, data []byte, o IngestOptions) (IngestResult, error) {
	b := &p.Batch
	b.Run.Kind = p.Kind
	b.Run.Source = parse.Text(name)
	if err := mergeMeta(name, &b.Run, o); err != nil {
		return IngestResult{}, err
	}
	// A run is identified by the file's bytes and what it says about where it ran: the same
	// file ingested twice is one run, while two identical small files from different commits
	// are two.
	h := sha256.New()
	h.Write(data)
	for _, v := range []string{b.Run.Commit, b.Run.Branch, b.Run.Event, b.Run.Machine, b.Run.DeviceClass} {
		h.Write([]byte{0})
		h.Write([]byte(v))
	}
	b.Run.ContentSHA = hex.EncodeToString(h.Sum(nil))
	res := IngestResult{Source: name, Kind: p.Kind, Rows: b.Rows()}
	id, err := db.st.Ingest(ctx, b, o.Progress)
	res.RunID = id
	if errors.Is(err, store.ErrDuplicate) {
		res.Duplicate = true
		return res, nil
	}
	return res, err
}

// Check validates a report without touching a store and says what it would ingest.
func Check(name string, data []byte) (IngestResult, error) {
	p, err := parse.Parse(name, data)
	if err != nil {
		return IngestResult{}, err
	}
	return IngestResult{Source: name, Kind: p.Kind, Rows: p.Batch.Rows()}, nil
}

func mergeMeta(name string, r *store.RunRow, o IngestOptions) error {
	pick := func(over, file, fb string) string {
		switch {
		case over != "":
			return over
		case file != "" && file != "unknown":
			return file
		case fb != "":
			return fb
		case file != "":
			return file
		}
		return "unknown"
	}
	r.Commit = pick(o.Override.Commit, r.Commit, o.Fallback.Commit)
	r.Branch = pick(o.Override.Branch, r.Branch, o.Fallback.Branch)
	r.Event = pick(o.Override.Event, r.Event, o.Fallback.Event)
	r.Machine = pick(o.Override.Machine, r.Machine, o.Fallback.Machine)
	r.DeviceClass = pick(o.Override.DeviceClass, r.DeviceClass, o.Fallback.DeviceClass)
	c := parse.NewChecker(name)
	for _, v := range []string{r.Commit, r.Branch, r.Event, r.Machine, r.DeviceClass} {
		c.Ident("run", "commit/branch/event/machine/device class", v, true)
	}
	switch {
	case !o.Override.Time.IsZero():
		r.Started = o.Override.Time
	case !r.Started.IsZero():
	case !o.Fallback.Time.IsZero():
		r.Started = o.Fallback.Time
	default:
		r.Started = time.Now()
	}
	if y := r.Started.Year(); y < 1970 || y > 9999 {
		c.Failf("run time %s out of range", r.Started.Format(time.RFC3339))
	}
	r.Ingested = time.Now()
	env := map[string]any{}
	if r.Env != "" {
		if err := json.Unmarshal([]byte(r.Env), &env); err != nil {
			return errs.New(errs.Internal, "report %s: env: %v", name, err)
		}
	}
	for _, m := range []map[string]string{o.Fallback.Env, o.Override.Env} {
		for k, v := range m {
			env[c.Ident("env", "key", k, true)] = parse.Text(v)
		}
	}
	r.Env = jsonString(env)
	return c.Err()
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}
