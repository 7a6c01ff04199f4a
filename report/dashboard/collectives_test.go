package dashboard

import (
	"context"
	"encoding/json"
	"html"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/collectives"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/report"
)

const hostileOp = `<img src=x onerror=alert('op')>`

// collectivesStore ingests two runs of the collectives verb's JSON (a second transport
// relabelled from the first, and a hostile op name) and returns the store's DSN.
func collectivesStore(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "results.db")
	db, err := report.Open(ctx, dsn, report.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := collectives.Matrix{Ops: []collectives.Op{collectives.AllReduce, collectives.AllGather}, RedOps: []dist.RedOp{dist.Sum},
		DTypes: []numerics.DType{numerics.F32}, Sizes: []int64{256, 4096, 65536}}
	at := time.Date(2026, 11, 20, 2, 0, 0, 0, time.UTC)
	for run := range 2 {
		rep := collectives.Report{Schema: collectives.ReportSchema, Kind: collectives.ReportKind, DeviceClass: "cpu/amd64", Seed: 1, Started: at.Add(time.Duration(run) * time.Hour)}
		for _, mode := range []dist.Mode{dist.Deterministic, dist.Exact} {
			rows, err := collectives.RunInproc(ctx, 2, collectives.Config{Cases: m.Cases(2), Mode: mode, Seed: 1, Iters: 2})
			if err != nil {
				t.Fatal(err)
			}
			rep.Rows = append(rep.Rows, rows...)
			for _, r := range rows {
				r.Transport = "tcp"
				rep.Rows = append(rep.Rows, r)
			}
		}
		h := rep.Rows[0]
		h.Op, h.Transport = hostileOp, `tcp"><b onmouseover=alert(1)>`
		rep.Rows = append(rep.Rows, h)
		rep.Finish()
		data, _ := json.Marshal(rep)
		if _, err := db.IngestBytes(ctx, "collectives.json", data, report.IngestOptions{Override: report.Meta{Commit: "c0ffee", Branch: "main"}}); err != nil {
			t.Fatal(err)
		}
	}
	return dsn
}

func TestCollectivesPageDrawsBusBWAgainstSize(t *testing.T) {
	db, err := report.OpenReadOnly(context.Background(), collectivesStore(t), report.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	page := render(t, s, PageCollectives)
	// all_gather f32, all_reduce f32 sum and the hostile op: three charts.
	if n := strings.Count(page, `<section class="coll-group"`); n != 3 {
		t.Fatalf("%d charts", n)
	}
	ar := rowOf(page, "data-group", "all_reduce f32 sum")
	if ar == "" || !strings.Contains(ar, `data-lines="4"`) {
		t.Fatalf("all_reduce group: %q", ar)
	}
	// One polyline per line, three sizes each; sizes labelled as nccl-tests takes them.
	if n := len(regexp.MustCompile(`<polyline class="xy s\d" points="[0-9.]+,[0-9.]+ [0-9.]+,[0-9.]+ [0-9.]+,[0-9.]+"/>`).FindAllString(page, -1)); n != 8 {
		t.Errorf("%d three-point lines, want 8", n)
	}
	for _, want := range []string{">256B<", ">4K<", ">64K<", "tcp exact, 2 ranks", "inproc deterministic, 2 ranks", "busbw (GB/s, higher is better)", `aria-current="page"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if !strings.Contains(page, html.EscapeString(hostileOp)) {
		t.Error("the hostile op is not shown as text")
	}
	for _, m := range hostileMarkers {
		if strings.Contains(page, m) {
			t.Errorf("unescaped %q", m)
		}
	}
	// Every page links to the new one.
	if !strings.Contains(render(t, s, PageOverview), `href="collectives.html"`) {
		t.Error("the overview does not link to the collectives page")
	}
}

func TestCollectivesPageWithoutRuns(t *testing.T) {
	s, _ := openSite(t)
	if page := render(t, s, PageCollectives); !strings.Contains(page, "no collectives runs yet") {
		t.Errorf("empty page:\n%s", page)
	}
}
