package etcd_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv/etcd"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The tcp transport meets its peers through the etcd store as through the TCP one.
func TestTCPConnectOverEtcd(t *testing.T) {
	ep := etcd.StartEtcdForTest(t)
	const n = 3
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ts := make([]*tcp.Transport, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		st, err := etcd.Dial(ctx, "etcd://"+ep, etcd.Job("tcp-over-etcd"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts[r], errs[r] = tcp.Connect(ctx, tcp.Config{Rank: r, World: n, Store: st, JobID: "tcp-over-etcd", ListenHost: "127.0.0.1", Timeout: 15 * time.Second})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		defer ts[r].Close()
	}
	// A ring: every rank sends to the next and receives from the previous.
	for r := range n {
		p := []byte{byte(r), 1, 2, 3}
		f := &dist.Frame{Header: dist.Header{Comm: 1, Seq: 0, Op: dist.OpSend, DType: numerics.I8, Src: uint16(r), Count: uint64(len(p)), CRC: dist.Checksum(p)}, Payload: p}
		if err := ts[r].Send(ctx, (r+1)%n, f); err != nil {
			t.Fatalf("rank %d send: %v", r, err)
		}
	}
	for r := range n {
		from := (r + n - 1) % n
		f, err := ts[r].Recv(ctx, 1, from)
		if err != nil {
			t.Fatalf("rank %d recv: %v", r, err)
		}
		if !bytes.Equal(f.Payload, []byte{byte(from), 1, 2, 3}) {
			t.Fatalf("rank %d got %v from %d", r, f.Payload, from)
		}
	}
}
