package dashboard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// DefaultAddr is where `tessera-qa dashboard serve` listens unless told otherwise.
const DefaultAddr = "127.0.0.1:8080"

// ListenAddr checks an address for Serve and fills in the loopback host when the address
// names only a port (":8080"): the dashboard is reachable from other machines only when the
// user writes a host that says so ("0.0.0.0:8080"). public reports whether it does.
func ListenAddr(addr string) (resolved string, public bool, err error) {
	if addr == "" {
		return DefaultAddr, false, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, errs.New(errs.Input, "dashboard: --addr %q: want HOST:PORT (e.g. %s)", quote(addr), DefaultAddr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if host == "localhost" {
		return net.JoinHostPort(host, port), false, nil
	}
	ip := net.ParseIP(host)
	return net.JoinHostPort(host, port), ip == nil || !ip.IsLoopback(), nil
}

// Serve answers on ln until ctx ends, then lets requests in flight finish (for up to 5 s).
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return errs.Wrap(errs.Input, err, "dashboard: serve on %s", ln.Addr())
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if e := <-done; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	if err != nil {
		return errs.Wrap(errs.Internal, err, "dashboard: shut down")
	}
	return nil
}
