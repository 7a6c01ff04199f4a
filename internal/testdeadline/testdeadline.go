// Package testdeadline bounds a whole test binary. `go tool ginkgo -r` runs a package's plain Go
// tests with no -test.timeout (go test's 10-minute default applies only under `go test`), so a
// test stuck in a network or process wait would hold CI until its outer limit and print nothing
// about where. A package whose tests wait on sockets, clusters or child processes calls Main from
// its TestMain: past the limit, every goroutine's stack goes to stderr under one coded line and
// the binary exits 2.
package testdeadline

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// Default is the limit for one package's tests; the slowest bounded package takes about two
// minutes on CI's two cores.
const Default = 8 * time.Minute

// Var overrides the limit (a Go duration) for a slow machine or a debugging session.
const Var = "TESSERA_TEST_DEADLINE"

// Main runs the tests under the limit (Default, or Var when set) and exits with their status.
func Main(m interface{ Run() int }) {
	limit := Default
	if v := os.Getenv(Var); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "E_INPUT: %s=%q: want a positive Go duration such as 10m\n", Var, v)
			os.Exit(2)
		}
		limit = d
	}
	stop := Watch(limit, os.Stderr, func() { os.Exit(2) })
	code := m.Run()
	stop()
	os.Exit(code)
}

// Watch calls exit after writing every goroutine's stack to w, unless the returned stop is
// called within limit.
func Watch(limit time.Duration, w io.Writer, exit func()) (stop func()) {
	t := time.AfterFunc(limit, func() {
		buf := make([]byte, 16<<20)
		buf = buf[:runtime.Stack(buf, true)]
		fmt.Fprintf(w, "E_TIMEOUT: tests of %s still running after %s; every goroutine follows\n%s\n", os.Args[0], limit, buf)
		exit()
	})
	return func() { t.Stop() }
}
