package store

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Options tune Open.
type Options struct {
	// ReadOnly opens without migrating and refuses writes (the dashboard). The schema must
	// already be at LatestVersion.
	ReadOnly bool
	// Version migrates only up to this version (tests of upgrades); 0 means LatestVersion.
	Version int
}

// IsPostgres reports whether dsn names a PostgreSQL database rather than a SQLite file.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Open opens (creating and migrating when needed) the store at dsn: a postgres:// URL or a
// SQLite file path (an optional "sqlite:" prefix is stripped). The program must import
// report/store/driver (package report does).
func Open(ctx context.Context, dsn string, o Options) (Store, error) {
	target := o.Version
	if target <= 0 || target > len(migrations) {
		target = len(migrations)
	}
	s, err := openDB(dsn, o.ReadOnly)
	if err != nil {
		return nil, err
	}
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, errs.New(errs.Input, "store %s: connect: %v", s.where, err)
	}
	if o.ReadOnly {
		v, err := version(ctx, s.db)
		if err != nil || v != len(migrations) {
			s.db.Close()
			if err != nil {
				return nil, errs.New(errs.Input, "store %s: not a results store: %v", s.where, err)
			}
			return nil, errs.New(errs.Unsupported, "store %s: schema version %d, this build reads %d (run `tessera-qa report ingest` once to migrate)", s.where, v, len(migrations))
		}
		return s, nil
	}
	if err := s.migrate(ctx, target); err != nil {
		s.db.Close()
		return nil, err
	}
	if target < len(migrations) {
		s.pinned = target
	}
	return s, nil
}

func openDB(dsn string, readOnly bool) (*sqlStore, error) {
	if IsPostgres(dsn) {
		if readOnly {
			// The server refuses writes too, not only this code.
			dsn = withParam(dsn, "default_transaction_read_only", "on")
		}
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, errs.New(errs.Input, "store: postgres URL: %v", err)
		}
		db.SetMaxOpenConns(8)
		return &sqlStore{db: db, d: postgresDialect, where: redact(dsn), readOnly: readOnly}, nil
	}
	path := strings.TrimPrefix(dsn, "sqlite:")
	if path == "" {
		return nil, errs.New(errs.Input, "store: empty database path")
	}
	if !readOnly {
		if dir := filepath.Dir(path); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, errs.New(errs.Input, "store %s: %v", path, err)
			}
		}
	} else if _, err := os.Stat(path); err != nil {
		return nil, errs.New(errs.Input, "store %s: %v", path, err)
	}
	// WAL: readers do not block the writer; busy_timeout: concurrent writers wait instead of
	// failing; _txlock=immediate: a write transaction takes the write lock at BEGIN, so two
	// ingests serialize instead of deadlocking on lock upgrade.
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Set("mode", "ro")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Set("_txlock", "immediate")
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, errs.New(errs.Input, "store %s: %v", path, err)
	}
	return &sqlStore{db: db, d: sqliteDialect, where: path, readOnly: readOnly}, nil
}

// redact drops a password from a URL before it reaches an error message.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	return u.Redacted()
}

// withParam adds a runtime parameter to a postgres URL (pgx passes unknown ones to the server).
func withParam(dsn, k, v string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn // sql.Open reports the bad URL
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}
