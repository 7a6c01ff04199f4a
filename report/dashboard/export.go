package dashboard

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// ExportResult says what Export wrote.
type ExportResult struct {
	Dir   string   `json:"dir"`
	Files []string `json:"files"` // relative to Dir, in the order written
	Bytes int64    `json:"bytes"`
}

// Export writes every page and the static assets into dir (created when missing), as a folder
// that opens from file:// with no network. Files are written through an os.Root opened on
// dir, so no name and no symbolic link inside dir can make a write land outside it; each file
// is written next to its final name and renamed into place.
func (s *Site) Export(ctx context.Context, dir string) (ExportResult, error) {
	res := ExportResult{Dir: dir, Files: []string{}}
	pages, err := s.Pages(ctx)
	if err != nil {
		return res, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, errs.New(errs.Input, "dashboard export: %v", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return res, errs.New(errs.Input, "dashboard export: %v", err)
	}
	defer root.Close()
	err = fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(staticFS, p)
		if err != nil {
			return err
		}
		return writeIn(root, p, data, &res)
	})
	if err != nil {
		return res, err
	}
	var buf bytes.Buffer
	for _, p := range pages {
		if err := ctx.Err(); err != nil {
			return res, errs.Wrap(errs.Input, err, "dashboard export: interrupted after %d files", len(res.Files))
		}
		buf.Reset()
		if err := s.Render(ctx, &buf, p); err != nil {
			return res, err
		}
		if err := writeIn(root, p, buf.Bytes(), &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// writeIn writes one file of the site under root. name is a site path ("index.html",
// "static/style.css"); anything that is not a plain relative path of known kind is refused
// before the file system is touched.
func writeIn(root *os.Root, name string, data []byte, res *ExportResult) error {
	if !exportName(name) {
		return errs.New(errs.Input, "dashboard export: refusing to write %q: not a plain file name inside the export folder", quote(name))
	}
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
			return errs.New(errs.Input, "dashboard export: %v", err)
		}
	}
	final := filepath.FromSlash(name)
	tmp := final + ".tmp"
	if err := root.WriteFile(tmp, data, 0o644); err != nil {
		return errs.New(errs.Input, "dashboard export: %v", err)
	}
	if err := root.Rename(tmp, final); err != nil {
		root.Remove(tmp)
		return errs.New(errs.Input, "dashboard export: %v", err)
	}
	res.Files = append(res.Files, name)
	res.Bytes += int64(len(data))
	return nil
}

// exportName accepts the names a site has: one or two segments of [a-z0-9._-] that do not
// start with a dot, ending in .html or .css.
func exportName(name string) bool {
	if !filepath.IsLocal(name) || !fs.ValidPath(name) || strings.Count(name, "/") > 1 {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part[0] == '.' {
			return false
		}
		for i := 0; i < len(part); i++ {
			c := part[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
	}
	ext := path.Ext(name)
	return ext == ".html" || ext == ".css"
}
