package rdzv

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// noLeak fails t if goroutines started during the test are still running shortly after it.
func noLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func serve(t *testing.T) *Server {
	t.Helper()
	s, err := Serve(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dial(t *testing.T, addr string) Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestStoreWaitTimesOut(t *testing.T) {
	noLeak(t)
	s := serve(t)
	st := dial(t, s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := st.Get(ctx, "never")
	if errs.CodeOf(err) != errs.CommInit || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `"never"`) {
		t.Fatalf("get of a missing key: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timed out after %s", d)
	}
	// The connection survived the server's timeout answer; a cancelled wait also leaves the
	// client usable.
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel2() }()
	if err := st.Wait(ctx2, "never"); err == nil {
		t.Fatal("cancelled wait returned nil")
	}
	ctx3, cancel3 := context.WithTimeout(context.Background(), time.Second)
	defer cancel3()
	if err := st.Set(ctx3, "after", []byte("x")); err != nil {
		t.Fatalf("client unusable after a timeout: %v", err)
	}
}

func TestDialRetriesUntilTheServerComes(t *testing.T) {
	noLeak(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := make(chan *Server, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		s, err := Serve(context.Background(), addr)
		if err != nil {
			t.Error(err)
		}
		srv <- s
	}()
	st := dial(t, addr)
	s := <-srv
	if s == nil {
		return
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := st.Set(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	st.Close()
}

func TestDialFailures(t *testing.T) {
	noLeak(t)
	// Nobody listening: E_COMM_INIT naming the address, after the deadline.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := Dial(ctx, addr)
	if errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("dial of nothing: %v", err)
	}
	// Something that is not a store: refused at once, not retried until the deadline.
	ln, _ = net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	start := time.Now()
	_, err = Dial(ctx2, ln.Addr().String())
	if errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), "not a tessera rendezvous store") || time.Since(start) > time.Second {
		t.Fatalf("dial of a non-store: %v after %s", err, time.Since(start))
	}
}

func TestServePortInUse(t *testing.T) {
	s := serve(t)
	_, err := Serve(context.Background(), s.Addr())
	if errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), s.Addr()) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second server on %s: %v", s.Addr(), err)
	}
}

func TestServerGoneFailsCallsPromptly(t *testing.T) {
	noLeak(t)
	s, err := Serve(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st := dial(t, s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := st.Get(ctx, "never"); done <- err }()
	time.Sleep(50 * time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		if errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), "connection lost") {
			t.Fatalf("get while the server closed: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("get hung after the server closed")
	}
}
