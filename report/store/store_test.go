package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/report/store"
	"github.com/tessera-qa/tessera-qa/report/store/storetest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// batch makes a run of n results of suite "s" whose digests are digest(i), plus one spec and
// one bench row.
func batch(sha, commit string, at time.Time, n int, digest func(i int) string, verdict func(i int) string) *store.Batch {
	b := &store.Batch{Run: store.RunRow{Kind: "results", Source: sha + ".json", ContentSHA: sha, Commit: commit, Branch: "main",
		Event: "nightly", Machine: "ci-1", DeviceClass: "cpu/amd64", Env: `{"os":"linux"}`, Started: at, Ingested: at}}
	for i := 0; i < n; i++ {
		b.Results = append(b.Results, store.ResultRow{Suite: "s", Case: fmt.Sprintf("c%d", i), DeviceClass: "cpu/amd64",
			Determinism: "bitwise", Backend: "cpu", Device: "cpu x2", Verdict: verdict(i), Digest: digest(i), Seed: "1", TotalMS: 1})
	}
	b.Specs = []store.SpecRow{{Suite: "g", Name: "spec one", State: "passed", Attempts: 1, DurationMS: 2}}
	b.Bench = []store.BenchRow{{Key: store.SeriesKey{Benchmark: "matmul", Device: "cpu/amd64", DType: "f32", Shape: "64x64"},
		Unit: "ratio", Value: 1.5, Samples: []float64{1.4, 1.5, 1.6}, EngineMS: 3, RefMS: 2, Ratio: 1.5}}
	b.Suites = []store.SuiteRow{{Suite: "s", Pass: n, Failing: []string{}}}
	return b
}

func pass(int) string               { return "pass" }
func dig(d string) func(int) string { return func(int) string { return d } }

func open(t *testing.T, dsn string, o store.Options) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn, o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestMigrateFreshAndReopen(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := open(t, dsn, store.Options{})
		v, err := st.SchemaVersion(ctx)
		if err != nil || v != store.LatestVersion() {
			t.Fatalf("version %d, %v; want %d", v, err, store.LatestVersion())
		}
		st.Close()
		st = open(t, dsn, store.Options{}) // a second open applies nothing and fails nothing
		if v, _ := st.SchemaVersion(ctx); v != store.LatestVersion() {
			t.Fatalf("reopened at version %d", v)
		}
	})
}

func TestUpgradeFromV1(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		old := open(t, dsn, store.Options{Version: 1})
		if v, _ := old.SchemaVersion(ctx); v != 1 {
			t.Fatalf("pinned open at version %d, want 1", v)
		}
		b := batch("a1", "c1", t0, 5, dig("aa"), pass)
		b.Metrics = nil
		id, err := old.Ingest(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.Acks(ctx); err == nil {
			t.Fatal("acks readable at version 1: the migration table lies")
		}
		old.Close()

		st := open(t, dsn, store.Options{})
		if v, _ := st.SchemaVersion(ctx); v != store.LatestVersion() {
			t.Fatalf("upgraded to %d, want %d", v, store.LatestVersion())
		}
		runs, err := st.Runs(ctx)
		if err != nil || len(runs) != 1 || runs[0].ID != id || runs[0].Commit != "c1" || !runs[0].Started.Equal(t0) {
			t.Fatalf("runs after upgrade: %+v, %v", runs, err)
		}
		rs, _ := st.Results(ctx, []int64{id})
		if len(rs) != 5 {
			t.Fatalf("%d results after upgrade, want 5", len(rs))
		}
		if _, err := st.AddAck(ctx, store.AckRow{Kind: "repro", Target: "x", Reason: "r", By: "me", Created: t0}); err != nil {
			t.Fatalf("v2 table after upgrade: %v", err)
		}
		if _, err := st.Metrics(ctx, "chaos"); err != nil {
			t.Fatalf("v3 table after upgrade: %v", err)
		}
	})
}

func TestNewerSchemaRefused(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := open(t, dsn, store.Options{})
		st.Close()
		raw := rawDB(t, dsn)
		if _, err := raw.Exec(`INSERT INTO schema_migrations (version, name, applied_ms) VALUES (999, 'future', 0)`); err != nil {
			t.Fatal(err)
		}
		_, err := store.Open(ctx, dsn, store.Options{})
		if errs.CodeOf(err) != errs.Unsupported || !strings.Contains(err.Error(), "999") {
			t.Fatalf("opening a newer schema: %v; want E_UNSUPPORTED naming 999", err)
		}
	})
}

func rawDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	driver := "sqlite"
	if store.IsPostgres(dsn) {
		driver = "pgx"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestIngestRoundTripAndDerived(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := open(t, dsn, store.Options{})
		// Ingested out of time order: run 2 (t0+2h, digest bb) first, then run 1 (t0, aa), then
		// run 3 (t0+1h, aa with case c0 failing).
		id2, err := st.Ingest(ctx, batch("r2", "c2", t0.Add(2*time.Hour), 3, dig("bb"), pass), nil)
		if err != nil {
			t.Fatal(err)
		}
		id1, _ := st.Ingest(ctx, batch("r1", "c1", t0, 3, dig("aa"), pass), nil)
		fail0 := func(i int) string {
			if i == 0 {
				return "fail"
			}
			return "pass"
		}
		id3, _ := st.Ingest(ctx, batch("r3", "c1", t0.Add(time.Hour), 3, dig("aa"), fail0), nil)

		runs, _ := st.Runs(ctx)
		if got := []int64{runs[0].ID, runs[1].ID, runs[2].ID}; got[0] != id1 || got[1] != id3 || got[2] != id2 {
			t.Fatalf("runs not in time order: %v (want %d %d %d)", got, id1, id3, id2)
		}
		ds, _ := st.Digests(ctx)
		var aa, bb *store.DigestRow
		for i := range ds {
			if ds[i].Key.Case == "c1" {
				switch ds[i].Digest {
				case "aa":
					aa = &ds[i]
				case "bb":
					bb = &ds[i]
				}
			}
		}
		if aa == nil || bb == nil || aa.FirstRun != id1 || aa.LastRun != id3 || aa.Count != 2 || bb.FirstRun != id2 || bb.Count != 1 {
			t.Fatalf("digest rows for c1: aa=%+v bb=%+v (runs %d %d %d)", aa, bb, id1, id3, id2)
		}
		flaky, _ := st.Outcomes(ctx, true)
		if len(flaky) != 1 || flaky[0].Name != "c0" || flaky[0].Commit != "c1" || flaky[0].Passes != 1 || flaky[0].Fails != 1 {
			t.Fatalf("flaky outcomes: %+v; want c0 on c1 with 1 pass 1 fail", flaky)
		}
		or, _ := st.OutcomeRuns(ctx, flaky[0])
		if len(or) != 2 || or[0] != id1 || or[1] != id3 {
			t.Fatalf("outcome runs %v, want [%d %d]", or, id1, id3)
		}
		fs, _ := st.Failures(ctx, []int64{id3})
		if len(fs) != 1 || fs[0].Name != "c0" || fs[0].Kind != "case" {
			t.Fatalf("failures of run 3: %+v", fs)
		}
		bench, _ := st.Bench(ctx, &store.SeriesKey{Benchmark: "matmul", Device: "cpu/amd64", DType: "f32", Shape: "64x64"})
		if len(bench) != 3 || len(bench[0].Samples) != 3 || bench[0].Samples[2] != 1.6 {
			t.Fatalf("bench rows: %+v", bench)
		}
		sr, _ := st.RunSuites(ctx)
		if len(sr) != 3 {
			t.Fatalf("%d suite rows, want 3", len(sr))
		}
		runsN, results, series, err := st.Counts(ctx)
		if err != nil || runsN != 3 || results != 12 || series != 1 {
			t.Fatalf("counts %d %d %d %v; want 3 12 1", runsN, results, series, err)
		}
		hist, _ := st.CaseHistory(ctx, store.ReproKey{Suite: "s", Case: "c2", DeviceClass: "cpu/amd64", Determinism: "bitwise"})
		if len(hist) != 3 || hist[0].Digest != "aa" || hist[2].Digest != "bb" {
			t.Fatalf("case history %+v", hist)
		}
	})
}

func TestDuplicateAndFailedIngestChangeNothing(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := open(t, dsn, store.Options{})
		id, err := st.Ingest(ctx, batch("same", "c1", t0, 3, dig("aa"), pass), nil)
		if err != nil {
			t.Fatal(err)
		}
		gen, _ := st.Generation(ctx)
		dup, err := st.Ingest(ctx, batch("same", "c2", t0, 3, dig("bb"), pass), nil)
		if !errors.Is(err, store.ErrDuplicate) || dup != id {
			t.Fatalf("second ingest of the same content: id %d err %v; want %d ErrDuplicate", dup, err, id)
		}
		// Cancel after the first batch of a large run: the whole run must vanish.
		cctx, cancel := context.WithCancel(ctx)
		big := batch("big", "c3", t0, 3000, dig("cc"), pass)
		calls := 0
		_, err = st.Ingest(cctx, big, func(int) { calls++; cancel() })
		if err == nil || calls == 0 {
			t.Fatalf("cancelled ingest: err %v after %d batches", err, calls)
		}
		if g, _ := st.Generation(ctx); g != gen {
			t.Fatalf("generation %s -> %s after failed ingests", gen, g)
		}
		runs, results, _, _ := st.Counts(ctx)
		ds, _ := st.Digests(ctx)
		if runs != 1 || results != 4 || len(ds) != 3 {
			t.Fatalf("after failed ingests: %d runs %d results %d digests; want 1 4 3", runs, results, len(ds))
		}
	})
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := open(t, dsn, store.Options{})
		st.Ingest(ctx, batch("x", "c1", t0, 2, dig("aa"), pass), nil)
		st.Close()
		ro := open(t, dsn, store.Options{ReadOnly: true})
		if runs, err := ro.Runs(ctx); err != nil || len(runs) != 1 {
			t.Fatalf("read-only read: %v %v", runs, err)
		}
		if _, err := ro.Ingest(ctx, batch("y", "c1", t0, 2, dig("aa"), pass), nil); err == nil {
			t.Fatal("read-only store accepted an ingest")
		}
		if _, err := ro.AddAck(ctx, store.AckRow{Kind: "perf", Reason: "r"}); err == nil {
			t.Fatal("read-only store accepted an ack")
		}
	})
}

func TestReadOnlyNeedsCurrentSchema(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.SQLite(t)
	if _, err := store.Open(ctx, dsn, store.Options{ReadOnly: true}); errs.CodeOf(err) != errs.Input {
		t.Fatalf("read-only open of a missing file: %v", err)
	}
	old := open(t, dsn, store.Options{Version: 1})
	old.Close()
	if _, err := store.Open(ctx, dsn, store.Options{ReadOnly: true}); errs.CodeOf(err) != errs.Unsupported {
		t.Fatalf("read-only open of a v1 store: %v; want E_UNSUPPORTED", err)
	}
}

func TestPasswordNotInErrors(t *testing.T) {
	_, err := store.Open(context.Background(), "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=1", store.Options{})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v: want a failure that does not show the password", err)
	}
}

func TestConcurrentIngests(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		open(t, dsn, store.Options{}).Close()
		// Four writers, each with its own handle (as separate processes would have); two of
		// them ingest the same file, which must become one run.
		errc := make(chan error, 4)
		for w := 0; w < 4; w++ {
			go func() {
				st, err := store.Open(ctx, dsn, store.Options{})
				if err != nil {
					errc <- err
					return
				}
				defer st.Close()
				sha := fmt.Sprintf("w%d", w)
				if w == 3 {
					sha = "w2"
				}
				_, err = st.Ingest(ctx, batch(sha, "c1", t0.Add(time.Duration(w)*time.Minute), 2000, dig("aa"), pass), nil)
				if errors.Is(err, store.ErrDuplicate) {
					err = nil
				}
				errc <- err
			}()
		}
		for w := 0; w < 4; w++ {
			if err := <-errc; err != nil {
				t.Fatalf("concurrent ingest: %v", err)
			}
		}
		st := open(t, dsn, store.Options{})
		runs, results, _, _ := st.Counts(ctx)
		ds, _ := st.Digests(ctx)
		if runs != 3 || results != 3*2001 || len(ds) != 2000 || ds[0].Count != 3 {
			t.Fatalf("after concurrent ingests: %d runs, %d rows, %d digests (count %d); want 3, %d, 2000 (3)", runs, results, len(ds), ds[0].Count, 3*2001)
		}
	})
}
