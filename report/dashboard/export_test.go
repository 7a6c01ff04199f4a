package dashboard

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestExportIsSelfContained(t *testing.T) {
	s, f := openSite(t)
	dir := filepath.Join(t.TempDir(), "out", "dash")
	res, err := s.Export(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{StylePath, PageOverview, PageSeries, PageRepro, PageFlaky, PageMetrics, PageCollectives, PageNodes, seriesPage(f.plan.Slow.ID())}
	for _, w := range want {
		if _, err := os.Stat(filepath.Join(dir, w)); err != nil {
			t.Errorf("export lacks %s: %v", w, err)
		}
	}
	if len(res.Files) != 1+7+7 {
		t.Errorf("export wrote %d files: %v", len(res.Files), res.Files)
	}
	link := regexp.MustCompile(`(?:href|src)="([^"]*)"`)
	for _, name := range res.Files {
		if !strings.HasSuffix(name, ".html") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, ":") || strings.HasPrefix(target, "/") {
				t.Errorf("%s links out of the folder: %s", name, target)
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, target)); err != nil {
				t.Errorf("%s links to %s, which the export lacks", name, target)
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
	// A second export over the first replaces files in place.
	if _, err := s.Export(context.Background(), dir); err != nil {
		t.Fatalf("second export: %v", err)
	}
}

func TestExportRefusesNamesOutsideTheFolder(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var res ExportResult
	for _, name := range []string{"../evil.html", "/etc/evil.html", "static/../../evil.html", "a/b/c.html", ".hidden.html",
		"evil.sh", "static\\..\\evil.html", "EVIL.html", "series-<x>.html", "", "index.html/..", "static/"} {
		if err := writeIn(root, name, []byte("x"), &res); err == nil || !strings.HasPrefix(err.Error(), "E_INPUT") {
			t.Errorf("writeIn(%q) = %v, want E_INPUT", name, err)
		}
	}
	if len(res.Files) != 0 {
		t.Errorf("wrote %v", res.Files)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil.html")); err == nil {
		t.Errorf("a file landed outside the export folder")
	}
}

func TestExportDoesNotFollowLinksOut(t *testing.T) {
	s, _ := openSite(t)
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	dir := filepath.Join(base, "dash")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A planted link: static/ points outside the export folder.
	if err := os.Symlink(outside, filepath.Join(dir, "static")); err != nil {
		t.Skipf("symlinks: %v", err)
	}
	_, err := s.Export(context.Background(), dir)
	if err == nil || !strings.HasPrefix(err.Error(), "E_INPUT") {
		t.Errorf("export through a link out of the folder: %v, want E_INPUT", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("export wrote outside its folder: %v", entries)
	}
}

func TestExportIntoAFileFails(t *testing.T) {
	s, _ := openSite(t)
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, []byte("x"), 0o644)
	if _, err := s.Export(context.Background(), file); err == nil || !strings.HasPrefix(err.Error(), "E_INPUT") {
		t.Errorf("export into a file: %v", err)
	}
}
