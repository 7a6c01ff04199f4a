// Package storetest is the rdzv.Store contract as one test that every store implementation
// runs (the TCP store in package rdzv, the etcd store in rdzv/etcd), so the two cannot drift.
package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Contract checks a Store through two clients a and b of the same job: values cross clients,
// Get and Wait wait for later Sets, Add is atomic, Check, Delete and the refusals are coded.
// It leaves keys "k", "empty", "later", "counter", "w1".."w3" and "big" behind.
func Contract(t *testing.T, a, b rdzv.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := a.Set(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(ctx, "k"); err != nil || string(v) != "v1" {
		t.Fatalf("get = %q %v", v, err)
	}
	if err := a.Set(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(ctx, "empty"); err != nil || len(v) != 0 {
		t.Fatalf("empty value = %q %v", v, err)
	}
	// Get waits for a later Set from another client.
	got := make(chan string, 1)
	go func() {
		v, err := b.Get(ctx, "later")
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(v)
	}()
	time.Sleep(100 * time.Millisecond)
	a.Set(ctx, "later", []byte("here"))
	if v := <-got; v != "here" {
		t.Fatalf("waiting get = %q", v)
	}
	// Add from many goroutines over two clients: every sum seen exactly once.
	var wg sync.WaitGroup
	seen := make([]int64, 40)
	for i := range seen {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := a
			if i%2 == 1 {
				st = b
			}
			n, err := st.Add(ctx, "counter", 1)
			if err != nil {
				t.Error(err)
			}
			seen[i] = n
		}()
	}
	wg.Wait()
	hit := map[int64]bool{}
	for _, n := range seen {
		hit[n] = true
	}
	if len(hit) != len(seen) || !hit[1] || !hit[int64(len(seen))] {
		t.Fatalf("add results %v", seen)
	}
	if n, err := a.Add(ctx, "counter", -40); err != nil || n != 0 {
		t.Fatalf("add -40 = %d %v", n, err)
	}
	if _, err := a.Add(ctx, "k", 1); errs.CodeOf(err) != errs.Input {
		t.Fatalf("add to a non-counter: %v", err)
	}
	if p, err := a.Check(ctx, "k", "nope", "later"); err != nil || !p[0] || p[1] || !p[2] {
		t.Fatalf("check = %v %v", p, err)
	}
	if err := a.Wait(ctx, "k", "later"); err != nil {
		t.Fatal(err)
	}
	// Wait for several keys set later, one by one, by the other client.
	waited := make(chan error, 1)
	go func() { waited <- b.Wait(ctx, "w1", "k", "w2", "w3") }()
	for _, k := range []string{"w3", "unrelated", "w1", "w2"} {
		time.Sleep(30 * time.Millisecond)
		select {
		case err := <-waited:
			t.Fatalf("wait returned before %s was set: %v", k, err)
		default:
		}
		a.Set(ctx, k, []byte(k))
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "k"); err != nil {
		t.Fatalf("deleting an absent key: %v", err)
	}
	if p, _ := a.Check(ctx, "k"); p[0] {
		t.Fatal("deleted key still present")
	}
	if err := a.Set(ctx, "", nil); errs.CodeOf(err) != errs.Input {
		t.Fatalf("empty key: %v", err)
	}
	big := make([]byte, 1<<20)
	big[12345] = 7
	if err := a.Set(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(ctx, "big"); err != nil || len(v) != len(big) || v[12345] != 7 {
		t.Fatalf("1 MiB value: %d bytes, %v", len(v), err)
	}
}
