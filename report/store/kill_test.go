package store_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/report/store"
	"github.com/tessera-qa/tessera-qa/report/store/storetest"
)

// The child side of TestSIGKILLDuringIngest: commits a few small runs, then starts a large
// one and stops inside its transaction, after some batches, waiting to be killed.
const (
	envKillDSN = "TESSERA_STORE_KILL_CHILD_DSN"
	smallRuns  = 3
	smallRows  = 50
	bigRows    = 60_000
	killAtRows = 5_000
)

func TestKillChild(t *testing.T) {
	dsn := os.Getenv(envKillDSN)
	if dsn == "" {
		t.Skip("child process of TestSIGKILLDuringIngest only")
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	for i := 0; i < smallRuns; i++ {
		sha := fmt.Sprintf("small-%d", i)
		if _, err := st.Ingest(ctx, batch(sha, "c1", t0.Add(time.Duration(i)*time.Hour), smallRows, dig("aa"), pass), nil); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
	}
	fmt.Println("committed", smallRuns)
	big := batch("big", "c2", t0.Add(24*time.Hour), bigRows, func(i int) string { return fmt.Sprintf("%064x", i) }, pass)
	st.Ingest(ctx, big, func(rows int) {
		fmt.Println("rows", rows)
		if rows >= killAtRows {
			time.Sleep(time.Minute) // inside the open transaction: the parent kills us here
		}
	})
	fmt.Println("error: the big ingest finished; it should have been killed")
	os.Exit(2)
}

// TestSIGKILLDuringIngest kills a process in the middle of a large ingest and checks that
// the store lost nothing committed, holds no part of the killed run, and still opens.
func TestSIGKILLDuringIngest(t *testing.T) {
	if os.Getenv(envKillDSN) != "" {
		t.Skip("parent only")
	}
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := open(t, dsn, store.Options{}) // migrated before the child starts
		st.Close()

		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), envKillDSN+"="+dsn)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killed := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			var seen []string
			for sc.Scan() {
				line := sc.Text()
				seen = append(seen, line)
				var n int
				if _, err := fmt.Sscanf(line, "rows %d", &n); err == nil && n >= killAtRows {
					cmd.Process.Signal(syscall.SIGKILL)
					killed <- strings.Join(seen, " | ")
					return
				}
			}
			killed <- "child ended without reaching the kill point: " + strings.Join(seen, " | ")
		}()
		var log string
		select {
		case log = <-killed:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatal("child did not reach the kill point in 60 s")
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child was not killed by SIGKILL: %v; its output: %s", err, log)
		}
		if !strings.Contains(log, fmt.Sprintf("committed %d", smallRuns)) {
			t.Fatalf("child output %q lacks the committed runs", log)
		}

		if fi, err := os.Stat(dsn + "-wal"); err == nil {
			// Pages the killed transaction spilled (if any) sit uncommitted in the WAL; recovery must
			// ignore them.
			t.Logf("WAL holds %d bytes at the kill", fi.Size())
		}
		st = open(t, dsn, store.Options{}) // opens and migrates after the crash
		if v, err := st.SchemaVersion(ctx); err != nil || v != store.LatestVersion() {
			t.Fatalf("after the kill: version %d, %v", v, err)
		}
		runs, err := st.Runs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != smallRuns {
			t.Fatalf("%d runs after the kill, want the %d committed ones (no part of the killed run)", len(runs), smallRuns)
		}
		var ids []int64
		for _, r := range runs {
			if r.Commit != "c1" || r.Rows != smallRows+2 {
				t.Fatalf("committed run changed: %+v", r)
			}
			ids = append(ids, r.ID)
		}
		rs, _ := st.Results(ctx, ids)
		nruns, results, _, _ := st.Counts(ctx)
		if len(rs) != smallRuns*smallRows || nruns != smallRuns || results != smallRuns*(smallRows+1) {
			t.Fatalf("rows after the kill: %d results of committed runs, %d results+specs in all; want %d and %d",
				len(rs), results, smallRuns*smallRows, smallRuns*(smallRows+1))
		}
		ds, _ := st.Digests(ctx)
		if len(ds) != smallRows {
			t.Fatalf("%d digest rows after the kill, want %d: the killed run leaked into derived tables", len(ds), smallRows)
		}
		for _, d := range ds {
			if d.Count != smallRuns {
				t.Fatalf("digest row %+v counts %d runs, want %d", d, d.Count, smallRuns)
			}
		}
		if !store.IsPostgres(dsn) {
			var ok string
			if err := rawDB(t, dsn).QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
				t.Fatalf("integrity_check: %q %v", ok, err)
			}
		}
		// The store takes the same file again: the killed run was never recorded.
		if _, err := st.Ingest(ctx, batch("big", "c2", t0, 10, dig("bb"), pass), nil); err != nil {
			t.Fatalf("ingest after the kill: %v", err)
		}
	})
}
