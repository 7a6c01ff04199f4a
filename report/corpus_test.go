package report_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/store/storetest"
)

// corpus reads the FuzzIngest seed files (Go's "go test fuzz v1" format, one []byte value).
func corpus(t *testing.T) map[string][]byte {
	dir := filepath.Join("parse", "testdata", "fuzz", "FuzzIngest")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(raw), "\n", 3)
		if len(lines) < 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
			t.Fatalf("%s: not a fuzz seed file", e.Name())
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out[e.Name()] = []byte(s)
	}
	return out
}

// TestIngestCorpus runs every FuzzIngest seed through real stores: a rejected file changes
// nothing, an accepted one adds one run, and the views and the gate still read the store.
func TestIngestCorpus(t *testing.T) {
	seeds := corpus(t)
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := openDB(t, dsn)
		if _, err := db.IngestFile(ctx, "testdata/results.json", report.IngestOptions{}); err != nil {
			t.Fatal(err)
		}
		accepted := 0
		for name, data := range seeds {
			gen, _ := db.Store().Generation(ctx)
			runs0, rows0, _, _ := db.Store().Counts(ctx)
			_, cerr := report.Check(name, data)
			res, err := db.IngestBytes(ctx, name, data, report.IngestOptions{})
			runs1, rows1, _, _ := db.Store().Counts(ctx)
			if (cerr == nil) != (err == nil) {
				t.Fatalf("%s: Check says %v, ingest says %v", name, cerr, err)
			}
			if err != nil {
				if g, _ := db.Store().Generation(ctx); g != gen || runs1 != runs0 || rows1 != rows0 {
					t.Fatalf("%s: rejected (%v) but the store changed", name, err)
				}
				if strings.HasPrefix(name, "hostile-") {
					continue
				}
				t.Fatalf("%s: a valid seed was rejected: %v", name, err)
			}
			if strings.HasPrefix(name, "hostile-") && !strings.Contains(name, "html") && !strings.Contains(name, "sql") && !strings.Contains(name, "utf8") && !strings.Contains(name, "dup-keys") {
				t.Errorf("%s: hostile seed accepted", name)
			}
			accepted++
			if !res.Duplicate && runs1 != runs0+1 {
				t.Fatalf("%s: accepted, runs %d -> %d", name, runs0, runs1)
			}
		}
		if accepted < 8 {
			t.Fatalf("only %d seeds accepted; the corpus lost its valid reports", accepted)
		}
		if _, err := db.Overview(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ReproMatrix(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Gate(ctx, report.GateOptions{}); err != nil {
			t.Fatal(err)
		}
		// What a hostile name looks like once stored: unchanged bytes, for the renderer to escape.
		ov, _ := db.Overview(ctx)
		found := false
		for _, s := range ov.Suites {
			found = found || s.Suite == "<script>alert(1)</script>"
		}
		if !found {
			t.Fatal("the HTML-named suite is not stored verbatim")
		}
	})
}
