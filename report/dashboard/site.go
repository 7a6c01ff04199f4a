package dashboard

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/report"
)

// Page names. Every page lives at the top of the site, so relative links between pages work
// the same from the server and from an exported folder.
const (
	PageOverview = "index.html"
	PageSeries   = "series.html" // the series index
	PageRepro    = "repro.html"
	PageFlaky    = "flaky.html"
	PageMetrics  = "metrics.html"
	// PageCollectives: busbw against size of the collectives checks (collectives.go).
	PageCollectives = "collectives.html"
	// PageNodes: the doctor's verdicts per host and device (nodes.go).
	PageNodes = "nodes.html"
	// StylePath is the one static asset pages link to.
	StylePath = "static/style.css"
)

// seriesPage is the page of one benchmark series.
func seriesPage(id string) string { return "series-" + id + ".html" }

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Site renders dashboard pages from a results store. It only reads: give it a DB opened with
// report.OpenReadOnly.
type Site struct {
	db    *report.DB
	pages map[string]*template.Template // by template file
	now   func() time.Time
}

// New parses the page templates.
func New(db *report.DB) (*Site, error) {
	base, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/chart.html")
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "dashboard templates")
	}
	s := &Site{db: db, pages: map[string]*template.Template{}, now: time.Now}
	for _, f := range []string{"overview", "series_index", "series", "repro", "flaky", "metrics", "collectives", "nodes"} {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+f+".html")
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "dashboard template %s", f)
		}
		s.pages[f] = t
	}
	return s, nil
}

// NotFoundError is returned for a page name the site does not have.
type NotFoundError struct{ Page string }

func (e *NotFoundError) Error() string {
	return string(errs.Input) + ": dashboard: no page " + quote(e.Page)
}

// IsNotFound reports whether err is a NotFoundError.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}

// quote keeps an arbitrary requested name on one line and short in a message.
func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s), "?")
}

// Render writes the page called name. The page is rendered whole before anything is written,
// so a store error never leaves half a page behind.
func (s *Site) Render(ctx context.Context, w io.Writer, name string) error {
	file, data, err := s.build(ctx, name)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := s.pages[file].ExecuteTemplate(&buf, "layout", data); err != nil {
		return errs.Wrap(errs.Internal, err, "dashboard: render %s", name)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// Pages lists every page of the site: the fixed pages and one per series.
func (s *Site) Pages(ctx context.Context) ([]string, error) {
	idx, err := s.db.SeriesIndex(ctx)
	if err != nil {
		return nil, err
	}
	out := []string{PageOverview, PageSeries, PageRepro, PageFlaky, PageMetrics, PageCollectives, PageNodes}
	for _, r := range idx {
		out = append(out, seriesPage(r.ID))
	}
	return out, nil
}

// build finds the page's template and data.
func (s *Site) build(ctx context.Context, name string) (string, any, error) {
	switch name {
	case PageOverview:
		d, err := s.overview(ctx)
		return "overview", d, err
	case PageSeries:
		d, err := s.seriesIndex(ctx)
		return "series_index", d, err
	case PageRepro:
		d, err := s.repro(ctx)
		return "repro", d, err
	case PageFlaky:
		d, err := s.flaky(ctx)
		return "flaky", d, err
	case PageMetrics:
		d, err := s.metrics(ctx)
		return "metrics", d, err
	case PageCollectives:
		d, err := s.collectives(ctx)
		return "collectives", d, err
	case PageNodes:
		d, err := s.nodes(ctx)
		return "nodes", d, err
	}
	if id, ok := strings.CutPrefix(name, "series-"); ok {
		if id, ok = strings.CutSuffix(id, ".html"); ok && isSeriesID(id) {
			key, found, err := s.db.SeriesByID(ctx, id)
			if err != nil {
				return "", nil, err
			}
			if found {
				d, err := s.series(ctx, key)
				return "series", d, err
			}
		}
	}
	return "", nil, &NotFoundError{Page: name}
}

// isSeriesID accepts what report.SeriesKey.ID produces: lowercase hex.
func isSeriesID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// KeepWarm computes the store's whole-history analyses ahead of requests: now, and again
// within every period after an ingest changed the store, until ctx ends. Without it the first
// request after a start or an ingest waits for the analysis of every series (seconds on a
// large history); with it a request finds them done. Errors are left for the next request
// to report.
func (s *Site) KeepWarm(ctx context.Context, every time.Duration) {
	last := ""
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if gen, err := s.db.Store().Generation(ctx); err == nil && gen != last {
			// Overview reads the cached analyses, computing them first when the store changed.
			if _, err := s.db.Overview(ctx); err == nil {
				last = gen
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
