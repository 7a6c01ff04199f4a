package dashboard

import (
	"bytes"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// Headers every response carries. The pages need nothing but themselves and the stylesheet:
// 'self' for everything, no scripts from anywhere, no framing, no referrer leaving the site.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
	"X-Content-Type-Options":  "nosniff",
	"X-Frame-Options":         "DENY",
	"Referrer-Policy":         "no-referrer",
	"Cache-Control":           "no-store",
}

// Handler serves the site read-only: GET and HEAD of the pages and the static assets,
// 405 for any other method, 404 for anything else, including any path that tries to climb
// out of the site ("..", encoded slashes, backslashes).
func (s *Site) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for k, v := range securityHeaders {
			h.Set(k, v)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "405 method not allowed: the dashboard is read-only", http.StatusMethodNotAllowed)
			return
		}
		name, ok := sitePath(r.URL.Path, r.URL.RawPath)
		if !ok {
			http.NotFound(w, r)
			return
		}
		if rest, isStatic := strings.CutPrefix(name, "static/"); isStatic {
			s.serveStatic(w, r, rest)
			return
		}
		var buf bytes.Buffer
		if err := s.Render(r.Context(), &buf, name); err != nil {
			if IsNotFound(err) {
				http.NotFound(w, r)
				return
			}
			http.Error(w, "500 "+oneLine(err.Error()), http.StatusInternalServerError)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		w.Write(buf.Bytes())
	})
}

// sitePath turns a request path into a site name ("index.html", "static/style.css"). It
// accepts only paths already in clean form: a request that needed cleaning ("/a/../b",
// "//x", "/static/..%2fx") is refused rather than reinterpreted.
func sitePath(p, raw string) (string, bool) {
	if raw != "" && raw != p {
		// Percent-encoded bytes that decode into path syntax ("%2f", "%5c", "%2e%2e").
		if strings.ContainsAny(p, `\`) || strings.Contains(strings.ToLower(raw), "%2f") || strings.Contains(strings.ToLower(raw), "%5c") {
			return "", false
		}
	}
	if p == "/" || p == "" {
		return PageOverview, true
	}
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") || path.Clean(p) != p {
		return "", false
	}
	name := p[1:]
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." || strings.HasPrefix(part, ".") {
			return "", false
		}
	}
	return name, true
}

// serveStatic serves one embedded asset by its exact name.
func (s *Site) serveStatic(w http.ResponseWriter, r *http.Request, name string) {
	if strings.Contains(name, "/") || !fs.ValidPath(name) {
		http.NotFound(w, r)
		return
	}
	data, err := fs.ReadFile(staticFS, "static/"+name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	w.Write(data)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
