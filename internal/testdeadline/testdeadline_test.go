package testdeadline

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuf lets the timer's goroutine write while the test reads.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestPastTheLimitItDumpsEveryGoroutineAndExits(t *testing.T) {
	var out syncBuf
	exited := make(chan struct{})
	stuck := make(chan struct{})
	defer close(stuck)
	go func() { <-stuck }() // stands for a test stuck in a wait
	Watch(20*time.Millisecond, &out, func() { close(exited) })
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not fire")
	}
	got := out.String()
	if !strings.HasPrefix(got, "E_TIMEOUT: tests of ") || !strings.Contains(got, "TestPastTheLimitItDumpsEveryGoroutineAndExits") {
		t.Fatalf("dump:\n%.600s", got)
	}
	if !strings.Contains(got, "testdeadline.TestPastTheLimitItDumpsEveryGoroutineAndExits.func") {
		t.Fatalf("the stuck goroutine is not in the dump:\n%.2000s", got)
	}
}

func TestStoppedInTimeItStaysQuiet(t *testing.T) {
	var out syncBuf
	fired := make(chan struct{}, 1)
	stop := Watch(50*time.Millisecond, &out, func() { fired <- struct{}{} })
	stop()
	time.Sleep(150 * time.Millisecond)
	if len(fired) != 0 || out.String() != "" {
		t.Fatalf("fired after stop: %q", out.String())
	}
}
