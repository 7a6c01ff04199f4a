package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// ErrDuplicate: the file was ingested before (same content hash).
var ErrDuplicate = errors.New("already ingested")

type sqlStore struct {
	db       *sql.DB
	d        *dialect
	where    string // for error messages; never carries a password
	readOnly bool
	// pinned is the schema version Options.Version held the store at (0: the latest). Writes
	// leave out columns a pinned older schema lacks (tests of upgrades).
	pinned int
}

// computationColumn: results and digests carry the computation (schema version 4).
func (s *sqlStore) computationColumn() bool { return s.pinned == 0 || s.pinned >= 4 }

func (s *sqlStore) Dialect() string { return s.d.name }
func (s *sqlStore) Close() error    { return s.db.Close() }

func (s *sqlStore) SchemaVersion(ctx context.Context) (int, error) {
	v, err := version(ctx, s.db)
	if err != nil {
		return 0, s.fail("read schema version", err)
	}
	return v, nil
}

func (s *sqlStore) fail(what string, err error) error {
	return errs.New(errs.Input, "store %s: %s: %v", s.where, what, err)
}

func (s *sqlStore) writable() error {
	if s.readOnly {
		return errs.New(errs.Input, "store %s: opened read-only", s.where)
	}
	return nil
}

func (s *sqlStore) Ingest(ctx context.Context, b *Batch, progress func(int)) (int64, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, s.fail("begin ingest", err)
	}
	defer tx.Rollback()
	var dup int64
	err = tx.QueryRowContext(ctx, s.d.bind(`SELECT id FROM runs WHERE content_sha = ?`), b.Run.ContentSHA).Scan(&dup)
	if err == nil {
		return dup, ErrDuplicate
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, s.fail("look up content hash", err)
	}
	r := b.Run
	var id int64
	err = tx.QueryRowContext(ctx, s.d.bind(`INSERT INTO runs (kind, source, content_sha, commit_sha, branch, event,
		machine, device_class, env, started_ms, ingested_ms, n_rows) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id`),
		r.Kind, r.Source, r.ContentSHA, r.Commit, r.Branch, r.Event, r.Machine, r.DeviceClass, r.Env,
		r.Started.UnixMilli(), r.Ingested.UnixMilli(), b.Rows()).Scan(&id)
	if err != nil {
		// A concurrent ingest of the same file may have won the unique content hash.
		tx.Rollback()
		if s.db.QueryRowContext(ctx, s.d.bind(`SELECT id FROM runs WHERE content_sha = ?`), b.Run.ContentSHA).Scan(&dup) == nil {
			return dup, ErrDuplicate
		}
		return 0, s.fail("insert run", err)
	}
	w := &batchWriter{s: s, tx: tx, ctx: ctx, progress: progress}
	w.results(id, b.Results)
	w.specs(id, b.Specs)
	w.bench(id, b.Bench)
	w.metrics(id, b.Metrics)
	w.suites(id, b.Suites)
	w.derived(id, r, b)
	if w.err != nil {
		return 0, w.err
	}
	if err := tx.Commit(); err != nil {
		return 0, s.fail("commit ingest", err)
	}
	return id, nil
}

func (s *sqlStore) AddAck(ctx context.Context, a AckRow) (int64, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	var id int64
	err := s.db.QueryRowContext(ctx, s.d.bind(`INSERT INTO acks (kind, target, digest, run_id, reason, by_user, created_ms)
		VALUES (?,?,?,?,?,?,?) RETURNING id`), a.Kind, a.Target, a.Digest, a.RunID, a.Reason, a.By, a.Created.UnixMilli()).Scan(&id)
	if err != nil {
		return 0, s.fail("insert ack", err)
	}
	return id, nil
}
