package dashboard

import (
	"context"
	"image"
	"image/png"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-qa/tessera-qa/internal/headless"
)

const chromium = headless.Chromium

// browserPage is one page the browser loads, with what its DOM and screenshot must show.
type browserPage struct {
	name  string
	dom   []string // substrings of the DOM Chromium built
	notIn []string
	// inks: colors the screenshot must contain, with at least that many pixels of each.
	inks map[string]int
}

// Colors of style.css that a reader relies on.
var (
	inkBlue  = [3]uint8{0x1f, 0x5f, 0xbf} // series line and points
	inkRed   = [3]uint8{0xc6, 0x28, 0x28} // blocking regression, new digest
	inkGreen = [3]uint8{0x43, 0xa0, 0x47} // passed bar
	inkPaleG = [3]uint8{0xd6, 0xef, 0xd8} // stable cell
)

var inkByName = map[string][3]uint8{"blue": inkBlue, "red": inkRed, "green": inkGreen, "pale-green": inkPaleG}

// TestDashboardInChromium serves the fixture store on 127.0.0.1, loads every kind of page in
// headless Chromium (Debian's package; ci/setup.d/40-chromium.sh installs it), checks the DOM
// the browser built and checks that each screenshot shows a page, not a blank. Set
// TESSERA_DASHBOARD_SHOTS=DIR to keep the screenshots.
func TestDashboardInChromium(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("headless browser test needs %s (ci/setup.d/40-chromium.sh installs Debian's chromium): %v", chromium, err)
	}
	if testing.Short() {
		t.Skip("headless browser test: about 15 s, skipped with -short")
	}
	s, f := openSite(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, s.Handler()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	base := "http://" + ln.Addr().String() + "/"
	shots := os.Getenv("TESSERA_DASHBOARD_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	slow, noisy := f.plan.Slow.ID(), f.plan.Noisy.ID()
	pages := []browserPage{
		{name: PageOverview,
			dom: []string{`class="regression block" data-series-id="` + slow + `" data-level="block"`,
				`class="repro-regression" data-case="` + f.plan.ChangedCase.Name() + `"`, `data-flaky="2"`, `data-open-blocking="2"`},
			notIn: []string{noisy}, inks: map[string]int{"red": 200, "green": 500}},
		{name: PageSeries,
			dom:  []string{`data-series-id="` + slow + `" data-level="block"`, `data-series-id="` + noisy + `" data-level="ok"`},
			inks: map[string]int{"red": 30}},
		{name: seriesPage(slow),
			dom:  []string{`data-blocking="true"`, `class="band-block"`, `class="band-base"`, `class="cp"`, "blocking regression", `<polyline class="series"`},
			inks: map[string]int{"blue": 300, "red": 200}},
		{name: seriesPage(noisy),
			dom:   []string{`data-blocking="false"`, `data-level="ok"`, `class="band-base"`, `<polyline class="series"`},
			notIn: []string{"band-block", "band-warn", "pt bad", "blocking regression"},
			inks:  map[string]int{"blue": 300}},
		{name: PageRepro,
			dom:  []string{`class="cell new-digest" data-status="new-digest" data-class="cpu/amd64"`, f.plan.NewDigest[:12]},
			inks: map[string]int{"red": 300, "pale-green": 2000}},
		{name: PageFlaky, dom: []string{`data-spec="` + f.plan.FlakySpec + `"`, "rank 3 digest differs"}},
		{name: PageMetrics, dom: []string{`id="chaos" data-kind="chaos" data-sections="1"`, `id="stress" data-kind="stress" data-sections="4"`,
			`id="partitions" data-kind="partitions" data-sections="2"`, `data-group="latency"`, `<svg class="chart"`},
			inks: map[string]int{"blue": 100}},
	}

	// Chromium takes 3-4 s to start here; two at a time keep the test near 15 s on 2 cores.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, p := range pages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			shot := filepath.Join(shots, strings.TrimSuffix(p.name, ".html")+".png")
			dom, err := browse(base+p.name, shot)
			if err != nil {
				t.Errorf("%s: %v", p.name, err)
				return
			}
			checkDOM(t, p, dom)
			checkShot(t, p, shot)
		}()
	}
	wg.Wait()
}

func browse(url, shot string) (string, error) { return headless.Browse(url, shot) }

// Chromium serializes every attribute value in double quotes with '"' escaped, so these
// find each start tag and each attribute name without mistaking a value for markup.
var (
	startTag = regexp.MustCompile(`<([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[^\s"'>/=]+(?:="[^"]*")?)*)\s*/?>`)
	attrName = regexp.MustCompile(`\s([^\s"'>/=]+)(?:="[^"]*")?`)
)

// injected names an element or attribute in the DOM that no dashboard page has: a script, an
// image or frame, or an event handler. Any of them came from unescaped text.
func injected(dom string) string {
	for _, m := range startTag.FindAllStringSubmatch(dom, -1) {
		switch strings.ToLower(m[1]) {
		case "script", "img", "iframe", "object", "embed", "i":
			return "<" + m[1] + ">"
		}
		for _, a := range attrName.FindAllStringSubmatch(m[2], -1) {
			if strings.HasPrefix(strings.ToLower(a[1]), "on") {
				return m[1] + " " + a[1] + "="
			}
		}
	}
	return ""
}

func checkDOM(t *testing.T, p browserPage, dom string) {
	t.Helper()
	if !strings.Contains(dom, `<link rel="stylesheet" href="static/style.css">`) || !strings.Contains(dom, `<nav>`) {
		t.Errorf("%s: the DOM is not a dashboard page:\n%.400s", p.name, dom)
	}
	// The pages have no script at all: any script or event handler in the DOM was injected.
	if bad := injected(dom); bad != "" {
		t.Errorf("%s: the DOM holds %s: hostile text was not escaped", p.name, bad)
	}
	if n := len(startTag.FindAllString(dom, -1)); n < 30 {
		t.Errorf("%s: the DOM has only %d elements", p.name, n)
	}
	for _, w := range p.dom {
		if !strings.Contains(dom, w) {
			t.Errorf("%s: the DOM lacks %q", p.name, w)
		}
	}
	for _, w := range p.notIn {
		if strings.Contains(dom, w) {
			t.Errorf("%s: the DOM shows %q", p.name, w)
		}
	}
}

// checkShot requires a screenshot that shows a styled page: many colors, a good share of
// pixels that are neither the page background nor white, and the colors that carry meaning
// on this page (a regression's red, the series' blue) in the content below the tab bar.
func checkShot(t *testing.T, p browserPage, file string) {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Errorf("%s: no screenshot: %v", p.name, err)
		return
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Errorf("%s: screenshot is not a PNG: %v", p.name, err)
		return
	}
	st := inkStats(img, 60)
	if st.colors < 12 || st.inked < 0.02 {
		t.Errorf("%s: screenshot looks blank: %d colors, %.1f%% of the pixels inked", p.name, st.colors, 100*st.inked)
	}
	for name, want := range p.inks {
		if got := st.near[inkByName[name]]; got < want {
			t.Errorf("%s: screenshot has %d %s pixels, want >= %d", p.name, got, name, want)
		}
	}
}

type stats struct {
	colors int
	inked  float64
	near   map[[3]uint8]int
}

// inkStats looks at the image below y0 (the tab bar is dark on every page, blank or not).
func inkStats(img image.Image, y0 int) stats {
	b := img.Bounds()
	seen := map[[3]uint8]bool{}
	st := stats{near: map[[3]uint8]int{}}
	total, inked := 0, 0
	for y := b.Min.Y + y0; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}
			seen[[3]uint8{c[0] &^ 7, c[1] &^ 7, c[2] &^ 7}] = true
			total++
			if c != [3]uint8{0xf6, 0xf7, 0xf9} && c != [3]uint8{0xff, 0xff, 0xff} {
				inked++
			}
			for _, ink := range inkByName {
				if close3(c, ink, 24) {
					st.near[ink]++
				}
			}
		}
	}
	st.colors = len(seen)
	if total > 0 {
		st.inked = float64(inked) / float64(total)
	}
	return st
}

func close3(a, b [3]uint8, tol int) bool {
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < -tol || d > tol {
			return false
		}
	}
	return true
}
