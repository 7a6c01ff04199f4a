package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// batchWriter inserts rows in multi-row statements; the first error sticks.
type batchWriter struct {
	s        *sqlStore
	tx       *sql.Tx
	ctx      context.Context
	progress func(int)
	written  int
	err      error
	stmts    map[string]*sql.Stmt // prepared multi-row inserts, by table, suffix and row count
}

// stmt prepares q once per transaction: a nightly inserts hundreds of identical 500-row
// statements, and SQLite spends more time parsing them than running them.
func (w *batchWriter) stmt(key, q string) (*sql.Stmt, error) {
	if st, ok := w.stmts[key]; ok {
		return st, nil
	}
	st, err := w.tx.PrepareContext(w.ctx, w.s.d.bind(q))
	if err != nil {
		return nil, err
	}
	if w.stmts == nil {
		w.stmts = map[string]*sql.Stmt{}
	}
	w.stmts[key] = st
	return st, nil
}

// insert writes rows into table in chunks that stay under the dialect's parameter limit.
// suffix follows the VALUES list (an ON CONFLICT clause).
func (w *batchWriter) insert(table string, cols []string, rows [][]any, suffix string, counts bool) {
	if w.err != nil || len(rows) == 0 {
		return
	}
	per := w.s.d.maxParams / len(cols)
	if per > 500 {
		per = 500
	}
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", len(cols)), ",") + ")"
	head := "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES "
	for start := 0; start < len(rows); start += per {
		end := min(start+per, len(rows))
		var q strings.Builder
		q.WriteString(head)
		args := make([]any, 0, (end-start)*len(cols))
		for i := start; i < end; i++ {
			if i > start {
				q.WriteByte(',')
			}
			q.WriteString(one)
			args = append(args, rows[i]...)
		}
		q.WriteString(suffix)
		st, err := w.stmt(table+suffix+"#"+strconv.Itoa(end-start), q.String())
		if err == nil {
			_, err = st.ExecContext(w.ctx, args...)
		}
		if err != nil {
			w.err = w.s.fail("insert into "+table, err)
			return
		}
		if counts {
			w.written += end - start
			if w.progress != nil {
				w.progress(w.written)
			}
		}
	}
}

func (w *batchWriter) results(id int64, rs []ResultRow) {
	rows := make([][]any, len(rs))
	for i, r := range rs {
		rows[i] = []any{id, r.Suite, r.Case, r.DeviceClass, r.Determinism, r.Backend, r.Device, r.Verdict,
			r.Reason, r.ErrorCode, r.Digest, r.ScheduleHash, r.Seed, r.Replay, r.TotalMS}
		if w.s.computationColumn() {
			rows[i] = append(rows[i], r.Computation)
		}
	}
	cols := []string{"run_id", "suite", "case_name", "device_class", "determinism", "backend", "device",
		"verdict", "reason", "error_code", "digest", "schedule_hash", "seed", "replay", "total_ms"}
	if w.s.computationColumn() {
		cols = append(cols, "computation")
	}
	w.insert("results", cols, rows, "", true)
}

func (w *batchWriter) specs(id int64, ss []SpecRow) {
	rows := make([][]any, len(ss))
	for i, r := range ss {
		rows[i] = []any{id, r.Suite, r.Name, r.State, r.Attempts, r.DurationMS, r.Failure, r.Location}
	}
	w.insert("specs", []string{"run_id", "suite", "name", "state", "attempts", "duration_ms", "failure", "location"}, rows, "", true)
}

func (w *batchWriter) bench(id int64, bs []BenchRow) {
	rows := make([][]any, len(bs))
	for i, r := range bs {
		rows[i] = []any{id, r.Key.Benchmark, r.Key.Device, r.Key.DType, r.Key.Shape, r.Unit, r.Value, encodeSamples(r.Samples),
			r.EngineMS, r.RefMS, r.Ratio, r.TFLOPS, r.GBps}
	}
	w.insert("bench", []string{"run_id", "benchmark", "device", "dtype", "shape", "unit", "value", "samples",
		"engine_ms", "ref_ms", "ratio", "tflops", "gbps"}, rows, "", true)
	var ks [][]any
	for _, r := range bs {
		for _, k := range r.Kernels {
			ks = append(ks, []any{id, r.Key.Benchmark, r.Key.Device, r.Key.DType, r.Key.Shape, k.Kernel, k.Label, k.MedianMS,
				k.Grid, k.Block, k.FLOPs, k.Bytes, k.Regs, k.Fusion})
		}
	}
	if len(ks) > 0 {
		w.insert("bench_kernels", []string{"run_id", "benchmark", "device", "dtype", "shape", "kernel", "label", "median_ms",
			"grid", "block", "flops", "bytes", "regs", "fusion"}, ks, "", false)
	}
}

func (w *batchWriter) metrics(id int64, ms []MetricRow) {
	rows := make([][]any, len(ms))
	for i, r := range ms {
		rows[i] = []any{id, r.Kind, r.Name, r.Metric, r.Value, r.Unit, r.Verdict, r.Note}
	}
	w.insert("metrics", []string{"run_id", "kind", "name", "metric", "value", "unit", "verdict", "note"}, rows, "", true)
}

func (w *batchWriter) suites(id int64, ss []SuiteRow) {
	rows := make([][]any, len(ss))
	for i, r := range ss {
		failing, _ := json.Marshal(r.Failing)
		rows[i] = []any{id, r.Suite, r.Pass, r.Fail, r.Error, r.Skip, r.WallMS, string(failing)}
	}
	w.insert("run_suites", []string{"run_id", "suite", "pass", "fail", "error", "skip", "wall_ms", "failing"}, rows, "", false)
}

// derived updates the digest and outcome tallies. Rows are aggregated per key first: one
// multi-row upsert may not touch the same key twice (PostgreSQL refuses).
func (w *batchWriter) derived(id int64, r RunRow, b *Batch) {
	ms := r.Started.UnixMilli()
	type dkey struct {
		ReproKey
		digest string
	}
	dn := map[dkey]int{}
	var dorder []dkey
	type okey struct{ kind, suite, name, class string }
	type tally struct {
		pass, fail int
		last       string
	}
	on := map[okey]*tally{}
	var oorder []okey
	count := func(k okey, pass, fail int, reason string) {
		t := on[k]
		if t == nil {
			t = &tally{}
			on[k] = t
			oorder = append(oorder, k)
		}
		t.pass += pass
		t.fail += fail
		if fail > 0 {
			t.last = reason
		}
	}
	for _, x := range b.Results {
		if x.Digest != "" && (x.Verdict == "pass" || x.Verdict == "fail") {
			k := dkey{ReproKey{x.Suite, x.Case, x.DeviceClass, x.Determinism, x.Computation}, x.Digest}
			if dn[k] == 0 {
				dorder = append(dorder, k)
			}
			dn[k]++
		}
		switch x.Verdict {
		case "pass":
			count(okey{"case", x.Suite, x.Case, x.DeviceClass}, 1, 0, "")
		case "fail", "error":
			count(okey{"case", x.Suite, x.Case, x.DeviceClass}, 0, 1, x.Reason)
		}
	}
	for _, x := range b.Specs {
		switch x.State {
		case "passed":
			// A spec that passed after retries failed its earlier attempts on this commit.
			count(okey{"spec", x.Suite, x.Name, r.DeviceClass}, 1, max(x.Attempts-1, 0), "passed after retries")
		case "failed", "panicked", "timedout", "aborted", "interrupted":
			count(okey{"spec", x.Suite, x.Name, r.DeviceClass}, 0, 1, x.Failure)
		}
	}
	// Sorted keys give every transaction the same lock order on PostgreSQL, so concurrent
	// ingests of overlapping cases wait for each other instead of deadlocking.
	slices.SortFunc(dorder, func(a, b dkey) int {
		return cmp.Or(cmp.Compare(a.Suite, b.Suite), cmp.Compare(a.Case, b.Case), cmp.Compare(a.DeviceClass, b.DeviceClass),
			cmp.Compare(a.Determinism, b.Determinism), cmp.Compare(a.Computation, b.Computation), cmp.Compare(a.digest, b.digest))
	})
	slices.SortFunc(oorder, func(a, b okey) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.suite, b.suite), cmp.Compare(a.name, b.name), cmp.Compare(a.class, b.class))
	})
	drows := make([][]any, len(dorder))
	for i, k := range dorder {
		drows[i] = []any{k.Suite, k.Case, k.DeviceClass, k.Determinism, k.Computation, k.digest, id, ms, id, ms, dn[k]}
	}
	// Runs may be ingested out of time order: first/last follow (started_ms, id).
	dcols, dkeyCols := []string{"suite", "case_name", "device_class", "determinism", "computation", "digest",
		"first_run", "first_ms", "last_run", "last_ms", "n"}, "suite, case_name, device_class, determinism, computation, digest"
	if !w.s.computationColumn() {
		dcols, dkeyCols = slices.Delete(dcols, 4, 5), "suite, case_name, device_class, determinism, digest"
		for i := range drows {
			drows[i] = slices.Delete(drows[i], 4, 5)
		}
	}
	w.insert("digests", dcols, drows,
		` ON CONFLICT (`+dkeyCols+`) DO UPDATE SET
		first_run = CASE WHEN excluded.first_ms < digests.first_ms OR (excluded.first_ms = digests.first_ms AND excluded.first_run < digests.first_run) THEN excluded.first_run ELSE digests.first_run END,
		first_ms = CASE WHEN excluded.first_ms < digests.first_ms THEN excluded.first_ms ELSE digests.first_ms END,
		last_run = CASE WHEN excluded.last_ms > digests.last_ms OR (excluded.last_ms = digests.last_ms AND excluded.last_run > digests.last_run) THEN excluded.last_run ELSE digests.last_run END,
		last_ms = CASE WHEN excluded.last_ms > digests.last_ms THEN excluded.last_ms ELSE digests.last_ms END,
		n = digests.n + excluded.n`, false)
	orows := make([][]any, len(oorder))
	for i, k := range oorder {
		t := on[k]
		orows[i] = []any{r.Commit, k.kind, k.suite, k.name, k.class, t.pass, t.fail, t.last, id, ms}
	}
	w.insert("outcomes", []string{"commit_sha", "kind", "suite", "name", "device_class", "passes", "fails",
		"last_failure", "last_run", "last_ms"}, orows,
		` ON CONFLICT (commit_sha, kind, suite, name, device_class) DO UPDATE SET
		passes = outcomes.passes + excluded.passes,
		fails = outcomes.fails + excluded.fails,
		last_failure = CASE WHEN excluded.fails > 0 AND excluded.last_ms >= outcomes.last_ms THEN excluded.last_failure ELSE outcomes.last_failure END,
		last_run = CASE WHEN excluded.last_ms >= outcomes.last_ms THEN excluded.last_run ELSE outcomes.last_run END,
		last_ms = CASE WHEN excluded.last_ms >= outcomes.last_ms THEN excluded.last_ms ELSE outcomes.last_ms END`, false)
}

// Samples are stored as little-endian float64s: reading 200,000 points' samples back as JSON
// took most of a whole-history analysis.
func encodeSamples(xs []float64) []byte {
	b := make([]byte, 8*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

func decodeSamples(b []byte) ([]float64, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("samples blob of %d bytes is not a float64 array", len(b))
	}
	if len(b) == 0 {
		return nil, nil
	}
	xs := make([]float64, len(b)/8)
	for i := range xs {
		xs[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return xs, nil
}
