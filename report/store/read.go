package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// query runs q and calls scan for each row.
func (s *sqlStore) query(ctx context.Context, what, q string, args []any, scan func(*sql.Rows) error) error {
	rows, err := s.db.QueryContext(ctx, s.d.bind(q), args...)
	if err != nil {
		return s.fail(what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return s.fail(what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return s.fail(what, err)
	}
	return nil
}

func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }

func (s *sqlStore) Runs(ctx context.Context) ([]RunRow, error) {
	var out []RunRow
	err := s.query(ctx, "read runs", `SELECT id, kind, source, content_sha, commit_sha, branch, event, machine,
		device_class, env, started_ms, ingested_ms, n_rows FROM runs ORDER BY started_ms, id`, nil, func(r *sql.Rows) error {
		var x RunRow
		var st, in int64
		if err := r.Scan(&x.ID, &x.Kind, &x.Source, &x.ContentSHA, &x.Commit, &x.Branch, &x.Event, &x.Machine,
			&x.DeviceClass, &x.Env, &st, &in, &x.Rows); err != nil {
			return err
		}
		x.Started, x.Ingested = ms(st), ms(in)
		out = append(out, x)
		return nil
	})
	return out, err
}

func (s *sqlStore) RunSuites(ctx context.Context) ([]SuiteRow, error) {
	var out []SuiteRow
	err := s.query(ctx, "read run suites", `SELECT run_id, suite, pass, fail, error, skip, wall_ms, failing FROM run_suites`, nil,
		func(r *sql.Rows) error {
			var x SuiteRow
			var failing string
			if err := r.Scan(&x.RunID, &x.Suite, &x.Pass, &x.Fail, &x.Error, &x.Skip, &x.WallMS, &failing); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(failing), &x.Failing); err != nil {
				return err
			}
			out = append(out, x)
			return nil
		})
	return out, err
}

func (s *sqlStore) Bench(ctx context.Context, key *SeriesKey) ([]BenchRow, error) {
	q := `SELECT run_id, benchmark, device, dtype, shape, unit, value, samples, engine_ms, ref_ms, ratio, tflops, gbps FROM bench`
	var args []any
	if key != nil {
		q += ` WHERE benchmark = ? AND device = ? AND dtype = ? AND shape = ?`
		args = []any{key.Benchmark, key.Device, key.DType, key.Shape}
	}
	var out []BenchRow
	err := s.query(ctx, "read bench", q, args, func(r *sql.Rows) error {
		var x BenchRow
		var samples []byte
		if err := r.Scan(&x.RunID, &x.Key.Benchmark, &x.Key.Device, &x.Key.DType, &x.Key.Shape, &x.Unit, &x.Value,
			&samples, &x.EngineMS, &x.RefMS, &x.Ratio, &x.TFLOPS, &x.GBps); err != nil {
			return err
		}
		var err error
		if x.Samples, err = decodeSamples(samples); err != nil {
			return err
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

func (s *sqlStore) BenchKernels(ctx context.Context, key SeriesKey, runIDs []int64) ([]KernelRow, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	q := `SELECT run_id, kernel, label, median_ms, grid, block, flops, bytes, regs, fusion FROM bench_kernels
		WHERE benchmark = ? AND device = ? AND dtype = ? AND shape = ? AND run_id IN (` + strings.TrimSuffix(strings.Repeat("?,", len(runIDs)), ",") + `)
		ORDER BY run_id, kernel`
	args := []any{key.Benchmark, key.Device, key.DType, key.Shape}
	for _, id := range runIDs {
		args = append(args, id)
	}
	var out []KernelRow
	err := s.query(ctx, "read bench kernels", q, args, func(r *sql.Rows) error {
		x := KernelRow{Key: key}
		if err := r.Scan(&x.RunID, &x.Kernel, &x.Label, &x.MedianMS, &x.Grid, &x.Block, &x.FLOPs, &x.Bytes, &x.Regs, &x.Fusion); err != nil {
			return err
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

func (s *sqlStore) Digests(ctx context.Context) ([]DigestRow, error) {
	var out []DigestRow
	err := s.query(ctx, "read digests", `SELECT suite, case_name, device_class, determinism, computation, digest, first_run, last_run, n
		FROM digests ORDER BY suite, case_name, device_class, determinism, computation, first_ms, first_run`, nil, func(r *sql.Rows) error {
		var x DigestRow
		if err := r.Scan(&x.Key.Suite, &x.Key.Case, &x.Key.DeviceClass, &x.Key.Determinism, &x.Key.Computation, &x.Digest, &x.FirstRun, &x.LastRun, &x.Count); err != nil {
			return err
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

func (s *sqlStore) CaseHistory(ctx context.Context, k ReproKey) ([]RunDigest, error) {
	var out []RunDigest
	err := s.query(ctx, "read case history", `SELECT r.run_id, r.digest FROM results r JOIN runs u ON u.id = r.run_id
		WHERE r.suite = ? AND r.case_name = ? AND r.device_class = ? AND r.determinism = ? AND r.computation = ? AND r.digest <> ''
		AND r.verdict IN ('pass', 'fail') ORDER BY u.started_ms, u.id`,
		[]any{k.Suite, k.Case, k.DeviceClass, k.Determinism, k.Computation}, func(r *sql.Rows) error {
			var x RunDigest
			if err := r.Scan(&x.RunID, &x.Digest); err != nil {
				return err
			}
			out = append(out, x)
			return nil
		})
	return out, err
}

func (s *sqlStore) Outcomes(ctx context.Context, flakyOnly bool) ([]OutcomeRow, error) {
	q := `SELECT commit_sha, kind, suite, name, device_class, passes, fails, last_failure, last_run FROM outcomes`
	if flakyOnly {
		q += failpoint.Pick(failpoint.JudgeReportFlakyFailuresOnly, ` WHERE passes > 0 AND fails > 0`, ` WHERE fails > 0`)
	}
	q += ` ORDER BY last_ms DESC, suite, name`
	var out []OutcomeRow
	err := s.query(ctx, "read outcomes", q, nil, func(r *sql.Rows) error {
		var x OutcomeRow
		if err := r.Scan(&x.Commit, &x.Kind, &x.Suite, &x.Name, &x.DeviceClass, &x.Passes, &x.Fails, &x.LastFailure, &x.LastRun); err != nil {
			return err
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

func (s *sqlStore) OutcomeRuns(ctx context.Context, o OutcomeRow) ([]int64, error) {
	var q string
	args := []any{o.Commit, o.Suite, o.Name, o.DeviceClass}
	if o.Kind == "spec" {
		q = `SELECT DISTINCT u.id, u.started_ms FROM specs x JOIN runs u ON u.id = x.run_id
			WHERE u.commit_sha = ? AND x.suite = ? AND x.name = ? AND u.device_class = ? ORDER BY u.started_ms, u.id`
	} else {
		q = `SELECT DISTINCT u.id, u.started_ms FROM results x JOIN runs u ON u.id = x.run_id
			WHERE u.commit_sha = ? AND x.suite = ? AND x.case_name = ? AND x.device_class = ? ORDER BY u.started_ms, u.id`
	}
	var out []int64
	err := s.query(ctx, "read outcome runs", q, args, func(r *sql.Rows) error {
		var id, st int64
		if err := r.Scan(&id, &st); err != nil {
			return err
		}
		out = append(out, id)
		return nil
	})
	return out, err
}

// idList renders run ids for an IN clause. They are integers, so inlining them is safe, and it
// keeps one statement for any count.
func idList(runIDs []int64) string {
	ids := make([]string, len(runIDs))
	for i, id := range runIDs {
		ids[i] = strconv.FormatInt(id, 10)
	}
	return "(" + strings.Join(ids, ",") + ")"
}

func (s *sqlStore) Results(ctx context.Context, runIDs []int64) ([]RunResult, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	var out []RunResult
	err := s.query(ctx, "read results", `SELECT run_id, suite, case_name, device_class, determinism, backend, device,
		verdict, reason, error_code, digest, schedule_hash, seed, replay, total_ms, computation FROM results WHERE run_id IN `+idList(runIDs),
		nil, func(r *sql.Rows) error {
			var x RunResult
			if err := r.Scan(&x.RunID, &x.Suite, &x.Case, &x.DeviceClass, &x.Determinism, &x.Backend, &x.Device, &x.Verdict,
				&x.Reason, &x.ErrorCode, &x.Digest, &x.ScheduleHash, &x.Seed, &x.Replay, &x.TotalMS, &x.Computation); err != nil {
				return err
			}
			out = append(out, x)
			return nil
		})
	return out, err
}

func (s *sqlStore) Failures(ctx context.Context, runIDs []int64) ([]FailureRow, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	in := idList(runIDs)
	var out []FailureRow
	err := s.query(ctx, "read failures", `SELECT run_id, 'case', suite, case_name, device_class, verdict, reason, error_code
		FROM results WHERE verdict IN ('fail', 'error') AND run_id IN `+in+`
		UNION ALL
		SELECT x.run_id, 'spec', x.suite, x.name, u.device_class, x.state, x.failure, ''
		FROM specs x JOIN runs u ON u.id = x.run_id
		WHERE x.state IN ('failed', 'panicked', 'timedout', 'aborted', 'interrupted') AND x.run_id IN `+in,
		nil, func(r *sql.Rows) error {
			var x FailureRow
			if err := r.Scan(&x.RunID, &x.Kind, &x.Suite, &x.Name, &x.DeviceClass, &x.Verdict, &x.Reason, &x.Code); err != nil {
				return err
			}
			out = append(out, x)
			return nil
		})
	return out, err
}

func (s *sqlStore) Acks(ctx context.Context) ([]AckRow, error) {
	var out []AckRow
	err := s.query(ctx, "read acks", `SELECT id, kind, target, digest, run_id, reason, by_user, created_ms FROM acks ORDER BY id`, nil,
		func(r *sql.Rows) error {
			var x AckRow
			var c int64
			if err := r.Scan(&x.ID, &x.Kind, &x.Target, &x.Digest, &x.RunID, &x.Reason, &x.By, &c); err != nil {
				return err
			}
			x.Created = ms(c)
			out = append(out, x)
			return nil
		})
	return out, err
}

func (s *sqlStore) Metrics(ctx context.Context, kind string) ([]MetricRow, error) {
	var out []MetricRow
	err := s.query(ctx, "read metrics", `SELECT run_id, kind, name, metric, value, unit, verdict, note FROM metrics
		WHERE kind = ? ORDER BY name, run_id`, []any{kind}, func(r *sql.Rows) error {
		var x MetricRow
		if err := r.Scan(&x.RunID, &x.Kind, &x.Name, &x.Metric, &x.Value, &x.Unit, &x.Verdict, &x.Note); err != nil {
			return err
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

func (s *sqlStore) Counts(ctx context.Context) (runs, results, series int, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM results) + (SELECT COUNT(*) FROM specs),
		(SELECT COUNT(*) FROM (SELECT DISTINCT benchmark, device, dtype, shape FROM bench) b)`).Scan(&runs, &results, &series)
	if err != nil {
		err = s.fail("count", err)
	}
	return
}

func (s *sqlStore) Generation(ctx context.Context) (string, error) {
	var r, a sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT (SELECT MAX(id) FROM runs), (SELECT MAX(id) FROM acks)`).Scan(&r, &a)
	if err != nil {
		return "", s.fail("read generation", err)
	}
	return strconv.FormatInt(r.Int64, 10) + "." + strconv.FormatInt(a.Int64, 10), nil
}
