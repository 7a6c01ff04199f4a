package dashboard

import (
	"context"
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/report"
)

// rowOf returns the opening tag of the element carrying attr="value" ("" when none).
func rowOf(page, attr, value string) string {
	re := regexp.MustCompile(`<[a-z]+ [^>]*` + regexp.QuoteMeta(attr+`="`+html.EscapeString(value)+`"`) + `[^>]*>`)
	return re.FindString(page)
}

func TestEveryPageRendersWithoutHostileMarkup(t *testing.T) {
	s, _ := openSite(t)
	pages, err := s.Pages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) != 7+7 { // 7 fixed pages; synth's 6 series + the hostile one
		t.Errorf("%d pages: %v", len(pages), pages)
	}
	for _, p := range pages {
		out := render(t, s, p)
		for _, m := range hostileMarkers {
			if strings.Contains(out, m) {
				i := strings.Index(out, m)
				t.Errorf("%s: unescaped %q near %q", p, m, out[max(0, i-80):min(len(out), i+80)])
			}
		}
		if !strings.HasPrefix(out, "<!DOCTYPE html>") || !strings.Contains(out, `href="static/style.css"`) {
			t.Errorf("%s: not a page of the site", p)
		}
		// Nothing may come from elsewhere: no absolute URLs in src or href.
		if m := regexp.MustCompile(`(src|href)="(https?:)?//`).FindString(out); m != "" {
			t.Errorf("%s: links outside the site: %s", p, m)
		}
	}
}

func TestHostileStringsAreShownAsText(t *testing.T) {
	s, _ := openSite(t)
	esc := html.EscapeString
	cases := map[string][]string{
		PageOverview: {esc(hostileSpec), "Evil &lt;i&gt;Suite&lt;/i&gt;"},
		PageSeries:   {esc(hostileBench), esc(hostileDevice)},
		PageRepro:    {esc("golden/" + hostileCase)},
		PageFlaky:    {esc(hostileSpec), esc(hostileLog)},
		PageMetrics:  {esc(hostileChaos), esc(hostileMetric), esc(hostileWorkload), esc(hostileLog)},
	}
	for page, wants := range cases {
		out := render(t, s, page)
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%s: missing the escaped text %q", page, w)
			}
		}
	}
}

func TestOverviewShowsThePlantedProblems(t *testing.T) {
	s, f := openSite(t)
	out := render(t, s, PageOverview)
	slow := rowOf(out, "data-series-id", f.plan.Slow.ID())
	if !strings.Contains(slow, `class="regression block"`) {
		t.Errorf("slowed series %s is not an open blocking regression: %q", f.plan.Slow.ID(), slow)
	}
	if strings.Contains(out, f.plan.Noisy.ID()) {
		t.Errorf("the noise-only series %s is listed on the overview", f.plan.Noisy.ID())
	}
	if r := rowOf(out, "data-case", f.plan.ChangedCase.Name()); !strings.Contains(r, "repro-regression") {
		t.Errorf("changed case %s is not a reproducibility regression: %q", f.plan.ChangedCase.Name(), r)
	}
	// Two flaky specs: synth's and the hostile one.
	if !strings.Contains(out, `data-flaky="2"`) || !strings.Contains(out, html.EscapeString(f.plan.FlakySpec)) {
		t.Errorf("flaky count or spec missing")
	}
	if !strings.Contains(out, `data-open-blocking="2"`) {
		t.Errorf("want 2 blocking problems (the slowdown and the digest)")
	}
	for _, suite := range []string{"golden", "Collectives Suite"} {
		if rowOf(out, "data-suite", suite) == "" {
			t.Errorf("suite %q missing from the last nightly table", suite)
		}
	}
}

func TestSeriesPages(t *testing.T) {
	s, f := openSite(t)
	slow := render(t, s, seriesPage(f.plan.Slow.ID()))
	for _, want := range []string{`data-blocking="true"`, `class="band-base"`, `class="band-block"`, `class="cp"`,
		"▼ change &#43;2", "blocking regression", `class="pt bad block"`, `class="series"`, `class="tick"`} {
		if !strings.Contains(slow, want) {
			t.Errorf("slowed series page lacks %q", want)
		}
	}
	// The change point is at the first slow run: synth slows the last 3 runs.
	if !strings.Contains(slow, `<tr class="change"><td class="num">27</td>`) {
		t.Errorf("change point table does not start the new level at run 27")
	}
	noisy := render(t, s, seriesPage(f.plan.Noisy.ID()))
	for _, bad := range []string{`data-blocking="true"`, `band-block`, `band-warn`, `class="pt bad`, "blocking regression"} {
		if strings.Contains(noisy, bad) {
			t.Errorf("noise-only series page shows %q", bad)
		}
	}
	if !strings.Contains(noisy, `data-level="ok"`) {
		t.Errorf("noise-only series is not ok")
	}
	idx := render(t, s, PageSeries)
	if r := rowOf(idx, "data-series-id", f.plan.Slow.ID()); !strings.Contains(r, `data-level="block"`) {
		t.Errorf("series index: slowed series row %q", r)
	}
	if r := rowOf(idx, "data-series-id", f.plan.Noisy.ID()); !strings.Contains(r, `data-level="ok"`) {
		t.Errorf("series index: noisy series row %q", r)
	}
	// Regressions first.
	if strings.Index(idx, f.plan.Slow.ID()) > strings.Index(idx, f.plan.Noisy.ID()) {
		t.Errorf("series index does not list the blocking series first")
	}
}

func TestReproMatrixCells(t *testing.T) {
	s, f := openSite(t)
	out := render(t, s, PageRepro)
	row := regexp.MustCompile(`(?s)<tr data-case="` + regexp.QuoteMeta(f.plan.ChangedCase.Name()) + `">.*?</tr>`).FindString(out)
	if !strings.Contains(row, `class="cell new-digest" data-status="new-digest" data-class="cpu/amd64"`) {
		t.Errorf("changed case is not red in the matrix: %q", row)
	}
	stable := regexp.MustCompile(`(?s)<tr data-case="golden/add/f32/32">.*?</tr>`).FindString(out)
	if !strings.Contains(stable, `data-status="stable"`) {
		t.Errorf("an unchanged case is not green: %q", stable)
	}
	if !strings.Contains(out, f.plan.NewDigest[:12]) || !strings.Contains(out, f.plan.OldDigest[:12]) {
		t.Errorf("matrix page does not name the new and the accepted digest")
	}
}

func TestMetricsSections(t *testing.T) {
	s, _ := openSite(t)
	out := render(t, s, PageMetrics)
	chaos := regexp.MustCompile(`(?s)<section class="metric-kind" id="chaos".*?</section>`).FindString(out)
	stress := regexp.MustCompile(`(?s)<section class="metric-kind" id="stress".*?</section>`).FindString(out)
	if !strings.Contains(chaos, `data-sections="1"`) || strings.Count(chaos, `<svg class="chart"`) != 2 || strings.Contains(chaos, "no data yet") {
		t.Errorf("chaos section: want one scenario with 2 metric charts:\n%s", chaos)
	}
	if strings.Contains(stress, "no data yet") {
		t.Errorf("stress section with data says there is none:\n%.1000s", stress)
	}
	if !strings.Contains(chaos, `class="pt bad block"`) {
		t.Errorf("the failing chaos run is not marked")
	}
}

func TestUnknownPagesAreNotFound(t *testing.T) {
	s, _ := openSite(t)
	for _, p := range []string{"", "nope.html", "series-.html", "series-0123456789abcdef.html", "series-ZZ.html",
		"series-../index.html", "../index.html", "static/style.css", "index.htm"} {
		err := s.Render(context.Background(), &strings.Builder{}, p)
		if !IsNotFound(err) {
			t.Errorf("Render(%q) = %v, want a NotFoundError", p, err)
		}
	}
}

func TestEmptyStore(t *testing.T) {
	ctx := context.Background()
	dsn := t.TempDir() + "/empty.db"
	db, err := report.Open(ctx, dsn, report.Config{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = report.OpenReadOnly(ctx, dsn, report.Config{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{PageOverview: "no runs ingested yet", PageSeries: "no benchmark series yet",
		PageRepro: "no results with digests yet", PageFlaky: "no flaky specs", PageMetrics: "no data yet"}
	for p, w := range want {
		if out := render(t, s, p); !strings.Contains(out, w) {
			t.Errorf("%s on an empty store does not say %q", p, w)
		}
	}
}
