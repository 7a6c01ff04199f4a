package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// migration is one schema step. Migrations are data: append a new one, never edit an applied
// one (a database records which versions it has).
type migration struct {
	version int
	name    string
	sql     []string // statements, with dialect type tokens
}

// migrations in order; version i+1 at index i.
var migrations = []migration{
	{1, "runs, results, specs, bench and derived tables", []string{
		`CREATE TABLE runs (
			id {{ID}},
			kind TEXT NOT NULL,
			source TEXT NOT NULL,
			content_sha TEXT NOT NULL UNIQUE,
			commit_sha TEXT NOT NULL,
			branch TEXT NOT NULL,
			event TEXT NOT NULL,
			machine TEXT NOT NULL,
			device_class TEXT NOT NULL,
			env TEXT NOT NULL,
			started_ms {{BIGINT}} NOT NULL,
			ingested_ms {{BIGINT}} NOT NULL,
			n_rows {{BIGINT}} NOT NULL)`,
		`CREATE INDEX runs_commit ON runs (commit_sha)`,
		`CREATE TABLE results (
			run_id {{BIGINT}} NOT NULL REFERENCES runs(id),
			suite TEXT NOT NULL, case_name TEXT NOT NULL,
			device_class TEXT NOT NULL, determinism TEXT NOT NULL,
			backend TEXT NOT NULL, device TEXT NOT NULL,
			verdict TEXT NOT NULL, reason TEXT NOT NULL, error_code TEXT NOT NULL,
			digest TEXT NOT NULL, schedule_hash TEXT NOT NULL, seed TEXT NOT NULL,
			replay TEXT NOT NULL, total_ms {{REAL}} NOT NULL)`,
		`CREATE INDEX results_run ON results (run_id)`,
		`CREATE INDEX results_case ON results (suite, case_name, device_class, determinism)`,
		`CREATE TABLE specs (
			run_id {{BIGINT}} NOT NULL REFERENCES runs(id),
			suite TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL,
			attempts {{BIGINT}} NOT NULL, duration_ms {{REAL}} NOT NULL,
			failure TEXT NOT NULL, location TEXT NOT NULL)`,
		`CREATE INDEX specs_run ON specs (run_id)`,
		`CREATE INDEX specs_name ON specs (suite, name)`,
		`CREATE TABLE bench (
			run_id {{BIGINT}} NOT NULL REFERENCES runs(id),
			benchmark TEXT NOT NULL, device TEXT NOT NULL, dtype TEXT NOT NULL, shape TEXT NOT NULL,
			unit TEXT NOT NULL, value {{REAL}} NOT NULL, samples {{BLOB}} NOT NULL,
			engine_ms {{REAL}} NOT NULL, ref_ms {{REAL}} NOT NULL, ratio {{REAL}} NOT NULL,
			tflops {{REAL}} NOT NULL, gbps {{REAL}} NOT NULL)`,
		`CREATE INDEX bench_series ON bench (benchmark, device, dtype, shape)`,
		`CREATE TABLE run_suites (
			run_id {{BIGINT}} NOT NULL REFERENCES runs(id),
			suite TEXT NOT NULL,
			pass {{BIGINT}} NOT NULL, fail {{BIGINT}} NOT NULL,
			error {{BIGINT}} NOT NULL, skip {{BIGINT}} NOT NULL,
			wall_ms {{REAL}} NOT NULL, failing TEXT NOT NULL,
			PRIMARY KEY (run_id, suite))`,
		// digests: the reproducibility tracker's memory, one row per digest ever seen per key.
		`CREATE TABLE digests (
			suite TEXT NOT NULL, case_name TEXT NOT NULL,
			device_class TEXT NOT NULL, determinism TEXT NOT NULL, digest TEXT NOT NULL,
			first_run {{BIGINT}} NOT NULL, first_ms {{BIGINT}} NOT NULL,
			last_run {{BIGINT}} NOT NULL, last_ms {{BIGINT}} NOT NULL,
			n {{BIGINT}} NOT NULL,
			PRIMARY KEY (suite, case_name, device_class, determinism, digest))`,
		// outcomes: pass/fail tallies per commit, from which flaky tests are read.
		`CREATE TABLE outcomes (
			commit_sha TEXT NOT NULL, kind TEXT NOT NULL, suite TEXT NOT NULL,
			name TEXT NOT NULL, device_class TEXT NOT NULL,
			passes {{BIGINT}} NOT NULL, fails {{BIGINT}} NOT NULL,
			last_failure TEXT NOT NULL, last_run {{BIGINT}} NOT NULL, last_ms {{BIGINT}} NOT NULL,
			PRIMARY KEY (commit_sha, kind, suite, name, device_class))`,
	}},
	{2, "acknowledgements and baseline resets", []string{
		`CREATE TABLE acks (
			id {{ID}},
			kind TEXT NOT NULL, target TEXT NOT NULL, digest TEXT NOT NULL,
			run_id {{BIGINT}} NOT NULL, reason TEXT NOT NULL, by_user TEXT NOT NULL,
			created_ms {{BIGINT}} NOT NULL)`,
		`CREATE INDEX acks_target ON acks (kind, target)`,
	}},
	{3, "chaos and stress metrics", []string{
		`CREATE TABLE metrics (
			run_id {{BIGINT}} NOT NULL REFERENCES runs(id),
			kind TEXT NOT NULL, name TEXT NOT NULL, metric TEXT NOT NULL,
			value {{REAL}} NOT NULL, unit TEXT NOT NULL, verdict TEXT NOT NULL, note TEXT NOT NULL)`,
		`CREATE INDEX metrics_kind ON metrics (kind, name)`,
	}},
	// Issue 13: a digest's reproducibility key names the computation (graph, inputs,
	// schedule), not only the case label that another seed may reuse for another graph.
	// Earlier rows keep computation '' and stay one key per case, as they were.
	{4, "reproducibility keys name the computation", []string{
		`ALTER TABLE results ADD COLUMN computation TEXT NOT NULL DEFAULT ''`,
		`CREATE TABLE digests_v4 (
			suite TEXT NOT NULL, case_name TEXT NOT NULL,
			device_class TEXT NOT NULL, determinism TEXT NOT NULL, computation TEXT NOT NULL, digest TEXT NOT NULL,
			first_run {{BIGINT}} NOT NULL, first_ms {{BIGINT}} NOT NULL,
			last_run {{BIGINT}} NOT NULL, last_ms {{BIGINT}} NOT NULL,
			n {{BIGINT}} NOT NULL,
			PRIMARY KEY (suite, case_name, device_class, determinism, computation, digest))`,
		`INSERT INTO digests_v4 (suite, case_name, device_class, determinism, computation, digest, first_run, first_ms, last_run, last_ms, n)
			SELECT suite, case_name, device_class, determinism, '', digest, first_run, first_ms, last_run, last_ms, n FROM digests`,
		`DROP TABLE digests`,
		`ALTER TABLE digests_v4 RENAME TO digests`,
	}},
	// Issue 24: per-kernel breakdowns of profiled benchmark points, so a regression of a
	// series can name the kernel that got slower.
	{5, "per-kernel breakdowns of benchmark points", []string{
		`CREATE TABLE bench_kernels (
			run_id {{BIGINT}} NOT NULL REFERENCES runs(id),
			benchmark TEXT NOT NULL, device TEXT NOT NULL, dtype TEXT NOT NULL, shape TEXT NOT NULL,
			kernel TEXT NOT NULL, label TEXT NOT NULL, median_ms {{REAL}} NOT NULL,
			grid TEXT NOT NULL, block TEXT NOT NULL,
			flops {{BIGINT}} NOT NULL, bytes {{BIGINT}} NOT NULL, regs {{BIGINT}} NOT NULL,
			fusion TEXT NOT NULL)`,
		`CREATE INDEX bench_kernels_series ON bench_kernels (benchmark, device, dtype, shape)`,
	}},
}

// LatestVersion is the schema version this build writes.
func LatestVersion() int { return len(migrations) }

const versionsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms BIGINT NOT NULL)`

// migrate applies every migration above the database's version up to target, each in its own
// transaction together with its schema_migrations row, so a crash leaves a consistent version.
// A database newer than this build is refused: its meaning is unknown to us.
func (s *sqlStore) migrate(ctx context.Context, target int) error {
	if _, err := s.db.ExecContext(ctx, versionsTable); err != nil {
		return errs.New(errs.Input, "store %s: create schema_migrations: %v", s.where, err)
	}
	for {
		done, err := s.migrateOne(ctx, target)
		if err != nil || done {
			return err
		}
	}
}

func (s *sqlStore) migrateOne(ctx context.Context, target int) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, errs.New(errs.Input, "store %s: begin migration: %v", s.where, err)
	}
	defer tx.Rollback()
	if s.d.name == "postgres" {
		// Two processes opening one fresh database would both try version 1.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7461001)`); err != nil {
			return false, errs.New(errs.Input, "store %s: lock for migration: %v", s.where, err)
		}
	}
	cur, err := version(ctx, tx)
	if err != nil {
		return false, errs.New(errs.Input, "store %s: read schema version: %v", s.where, err)
	}
	if cur > len(migrations) {
		return false, errs.New(errs.Unsupported, "store %s: schema version %d is newer than this build (%d); upgrade tessera-qa", s.where, cur, len(migrations))
	}
	if cur >= target {
		return true, nil
	}
	m := migrations[cur]
	for i, stmt := range m.sql {
		if _, err := tx.ExecContext(ctx, s.d.ddl(stmt)); err != nil {
			return false, errs.New(errs.Internal, "store %s: migration %d (%s) statement %d: %v", s.where, m.version, m.name, i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, s.d.bind(`INSERT INTO schema_migrations (version, name, applied_ms) VALUES (?, ?, ?)`),
		m.version, m.name, time.Now().UnixMilli()); err != nil {
		return false, errs.New(errs.Internal, "store %s: record migration %d: %v", s.where, m.version, err)
	}
	if err := tx.Commit(); err != nil {
		return false, errs.New(errs.Internal, "store %s: commit migration %d: %v", s.where, m.version, err)
	}
	return false, nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func version(ctx context.Context, q queryer) (int, error) {
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, err
	}
	return int(v.Int64), nil
}
