package dashboard

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHandlerServesPagesWithSecurityHeaders(t *testing.T) {
	s, f := openSite(t)
	h := s.Handler()
	for _, p := range []string{"/", "/index.html", "/series.html", "/" + seriesPage(f.plan.Slow.ID()), "/repro.html", "/flaky.html", "/metrics.html"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: %d %s", p, rec.Code, rec.Header().Get("Content-Type"))
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", p)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+StylePath, nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/css; charset=utf-8" || !strings.Contains(rec.Body.String(), ".chart") {
		t.Errorf("GET stylesheet: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
}

func TestHandlerIsReadOnly(t *testing.T) {
	s, _ := openSite(t)
	h := s.Handler()
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions, "TRACE", "CONNECT"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(m, "/index.html", strings.NewReader("x=1")))
		if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: %d, Allow %q; want 405 with Allow: GET, HEAD", m, rec.Code, rec.Header().Get("Allow"))
		}
	}
}

// TestTraversalIsRefused sends raw request lines over a real connection, so that no client
// cleans the path before the server sees it.
func TestTraversalIsRefused(t *testing.T) {
	s, _ := openSite(t)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, p := range []string{
		"/static/../../../../etc/passwd", "/static/..%2f..%2f..%2fetc%2fpasswd", "/static/%2e%2e/%2e%2e/go.mod",
		"/../index.html", "/static/..\\..\\go.mod", "/static/%5c..%5cgo.mod", "//etc/passwd", "/static//style.css",
		"/static/./style.css", "/static/", "/static/.hidden", "/templates/layout.html", "/static/style.css/..",
		"/series-../../x.html", "/index.html%00.css", "/%2e%2e/%2e%2e/etc/passwd",
	} {
		code, body := rawGET(t, srv.Listener.Addr().String(), p)
		if code != http.StatusNotFound && code != http.StatusBadRequest {
			t.Errorf("GET %s: status %d, want 404 or 400", p, code)
		}
		if strings.Contains(body, "root:") || strings.Contains(body, "module ") || strings.Contains(body, "{{define") {
			t.Errorf("GET %s leaked a file: %.80q", p, body)
		}
	}
	if code, _ := rawGET(t, srv.Listener.Addr().String(), "/static/style.css"); code != http.StatusOK {
		t.Errorf("the stylesheet itself: %d", code)
	}
}

func rawGET(t *testing.T, addr, target string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHeadHasNoBody(t *testing.T) {
	s, _ := openSite(t)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := http.Head(srv.URL + "/repro.html")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(b) != 0 || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("HEAD: %d, %d body bytes", resp.StatusCode, len(b))
	}
}

func TestListenAddr(t *testing.T) {
	for _, c := range []struct {
		in, want string
		public   bool
	}{
		{"", DefaultAddr, false}, {":8080", "127.0.0.1:8080", false}, {"127.0.0.1:0", "127.0.0.1:0", false},
		{"localhost:9000", "localhost:9000", false}, {"[::1]:80", "[::1]:80", false},
		{"0.0.0.0:8080", "0.0.0.0:8080", true}, {"10.1.2.3:80", "10.1.2.3:80", true}, {"dash.example:80", "dash.example:80", true},
	} {
		got, public, err := ListenAddr(c.in)
		if err != nil || got != c.want || public != c.public {
			t.Errorf("ListenAddr(%q) = %q, %v, %v; want %q, %v", c.in, got, public, err, c.want, c.public)
		}
	}
	if _, _, err := ListenAddr("8080"); err == nil || !strings.HasPrefix(err.Error(), "E_INPUT") {
		t.Errorf("ListenAddr(8080): %v, want E_INPUT", err)
	}
}

func TestServeStopsWithContext(t *testing.T) {
	s, _ := openSite(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, s.Handler()) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

func TestKeepWarmStopsWithContext(t *testing.T) {
	s, _ := openSite(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.KeepWarm(ctx, 10*time.Millisecond); close(done) }()
	time.Sleep(50 * time.Millisecond)
	// Pages render while it runs (both go through the DB's analysis cache).
	render(t, s, PageOverview)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("KeepWarm did not return after its context ended")
	}
}
