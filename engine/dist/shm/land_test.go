package shm

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// A frame that stops halfway while the reader fills a posted buffer: the release (a failed
// call's) must return within its bound, the buffer must not be written after it returned, and
// the peer whose stream stopped mid-frame must be failed with a coded error, not read on.
func TestReleaseOfAHalfFilledLanding(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, nil)
	const n = 1000
	f := frame(0, 1, 3, 7, n)
	dst := make([]byte, n)
	release := ts[1].Land(3, 0, 7, 0, dst)
	var hdr [dist.HeaderSize]byte
	f.MarshalHeader(hdr[:])
	w := waitFor{stop: ts[0].closing}
	if _, err := ts[0].peers[1].out.write(w, hdr[:], f.Payload[:n/2]); err != nil {
		t.Fatal(err)
	}
	notify(ts[0].peers[1].out.dataSeq, ts[0].peers[1].out.dataWait)
	deadline := time.Now().Add(5 * time.Second)
	for !bytes.Equal(dst[:n/2], f.Payload[:n/2]) {
		if time.Now().After(deadline) {
			t.Fatal("the reader never filled the first half of the posted buffer")
		}
		time.Sleep(time.Millisecond)
	}
	t0 := time.Now()
	release()
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("release took %v", d)
	}
	snapshot := append([]byte(nil), dst...)
	if _, err := ts[0].peers[1].out.write(w, f.Payload[n/2:]); err != nil {
		t.Fatal(err)
	}
	notify(ts[0].peers[1].out.dataSeq, ts[0].peers[1].out.dataWait)
	time.Sleep(50 * time.Millisecond)
	if !bytes.Equal(dst, snapshot) {
		t.Fatal("the posted buffer was written after its release returned")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := ts[1].Recv(ctx, 3, 0); errs.CodeOf(err) != errs.TimeoutComm || ctx.Err() != nil {
		t.Fatalf("receive after the abandoned frame: got %v, want the peer failed with E_TIMEOUT_COMM", err)
	} else if !strings.Contains(err.Error(), "abandoned") {
		t.Fatalf("the error does not say the frame was abandoned: %v", err)
	}
}
