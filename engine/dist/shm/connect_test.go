//go:build unix

package shm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func storeFor(t *testing.T) string {
	t.Helper()
	srv, err := rdzv.Serve(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addr()
}

func dial(t *testing.T, addr string) rdzv.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := rdzv.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A rank that never comes: Connect ends at its deadline with E_COMM_INIT naming it, and the
// ring file it made for that rank is gone.
func TestConnectPeerMissingIsCommInit(t *testing.T) {
	noLeak(t)
	dir := t.TempDir()
	start := time.Now()
	_, err := Connect(context.Background(), Config{Rank: 0, World: 2, Store: dial(t, storeFor(t)), JobID: "missing", Dir: dir, Timeout: 200 * time.Millisecond})
	if errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("got %v, want E_COMM_INIT naming rank 1", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("a 200 ms setup deadline took %s", d)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a failed Connect left %s", ents[0].Name())
	}
}

// Ranks that disagree on the ring size refuse each other's rings at once.
func TestConnectRingMismatchIsCommInit(t *testing.T) {
	noLeak(t)
	addr, dir := storeFor(t), t.TempDir()
	errsOut := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		st := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := Connect(context.Background(), Config{Rank: r, World: 2, Store: st, JobID: "mismatch", Dir: dir,
				RingBytes: (64 << 10) << r, Timeout: 5 * time.Second})
			if tr != nil {
				tr.Close()
			}
			errsOut[r] = err
		}()
	}
	wg.Wait()
	for r, err := range errsOut {
		if errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), "ring sizes") {
			t.Fatalf("rank %d: got %v, want E_COMM_INIT about ring sizes", r, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("failed Connects left %s", ents[0].Name())
	}
}

// A crash's leftover (a ring file whose creator is gone, old enough) is swept; a file of a
// live process, or a fresh one, is not.
func TestSweepRemovesOnlyDeadCreatorsFiles(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead, live := strconv.Itoa(cmd.Process.Pid), strconv.Itoa(os.Getpid())
	old := time.Now().Add(-2 * staleAge)
	files := map[string]bool{ // name: swept
		filePrefix + dead + "-aa-0to1": true,
		filePrefix + live + "-bb-0to1": false,
		filePrefix + dead + "-cc-1to0": false, // fresh
		"other-" + dead + "-dd":        false,
	}
	for name, swept := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if swept || strings.Contains(name, "bb") || strings.HasPrefix(name, "other") {
			os.Chtimes(p, old, old)
		}
	}
	sweepStale(dir)
	for name, swept := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if gone := os.IsNotExist(err); gone != swept {
			t.Errorf("%s: removed %v, want %v", name, gone, swept)
		}
	}
}
