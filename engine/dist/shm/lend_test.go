//go:build unix

package shm

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// inRing reports whether b lies in r's data: a payload read in place, not copied out.
func inRing(r *ring, b []byte) bool {
	if len(b) == 0 || len(r.data) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&r.data[0]))
	return p >= lo && p < lo+uintptr(len(r.data))
}

// readerAt is how far r's reader has read.
func readerAt(r *ring) uint64 {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	return r.rd
}

// lendAndSend posts loans on rank 1 for k frames of n bytes from rank 0 on comm 5 (seq 0..k-1),
// sends them and receives them, checking each one's bytes and its checksum; with each set, it
// hands every frame to each as it comes and recycles it, instead of keeping them all out.
func lendAndSend(t *testing.T, ts []*Transport, k, n int, each func(*dist.Frame)) ([]*dist.Frame, []func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	releases := make([]func(), k)
	for i := range k {
		releases[i] = ts[1].Lend(5, 0, uint64(i), 0, n)
	}
	got := make([]*dist.Frame, k)
	for i := range k {
		if err := ts[0].Send(ctx, 1, frame(0, 1, 5, uint64(i), n)); err != nil {
			t.Fatal(err)
		}
		f, err := ts[1].Recv(ctx, 5, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkFrame(f, 0, 1, 5, uint64(i), n); err != nil {
			t.Fatal(err)
		}
		if each != nil {
			each(f)
			ts[1].Recycle(f)
			continue
		}
		got[i] = f
	}
	return got, releases
}

// Loans end in any order, and the space the producer sees comes back only up to the oldest
// payload still out: bytes a receiver reads in place are never overwritten under it.
func TestLoansEndInAnyOrderTailWaitsForTheOldest(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, nil)
	in := ts[1].peers[0].in
	start := atomic.LoadUint64(in.tail)
	fs, releases := lendAndSend(t, ts, 3, 1000, nil)
	for i, f := range fs {
		if !inRing(in, f.Payload) {
			t.Fatalf("frame %d was copied out, want it read in place", i)
		}
	}
	if got := ts[1].Stats().Lent; got != 3 {
		t.Fatalf("lent %d frames, want 3", got)
	}
	oldest := start + dist.HeaderSize // the first payload's stream position
	for _, i := range []int{2, 1} {
		ts[1].Recycle(fs[i])
		if tail := atomic.LoadUint64(in.tail); tail != oldest {
			t.Fatalf("after frame %d came back: tail %d, want %d (frame 0 is still out)", i, tail, oldest)
		}
	}
	ts[1].Recycle(fs[0])
	if tail, rd := atomic.LoadUint64(in.tail), readerAt(in); tail != rd || rd != start+3*(dist.HeaderSize+1000) {
		t.Fatalf("all back: tail %d, reader %d, want both %d", tail, rd, start+3*(dist.HeaderSize+1000))
	}
	for _, release := range releases {
		release()
	}
}

// A failed call releases its posts without recycling what it received: the release hands the
// loan back, so the ring is whole again (a frame as large as the ring's free space goes in).
func TestReleaseHandsBackALoanNeverRecycled(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, func(c *Config) { c.RingBytes = MinRingBytes })
	in := ts[1].peers[0].in
	fs, releases := lendAndSend(t, ts, 1, 4000, nil)
	if !inRing(in, fs[0].Payload) {
		t.Fatal("the frame was copied out, want it read in place")
	}
	if atomic.LoadUint64(in.tail) == readerAt(in) {
		t.Fatal("tail moved past a payload still lent out")
	}
	releases[0]()
	if tail, rd := atomic.LoadUint64(in.tail), readerAt(in); tail != rd {
		t.Fatalf("after the release: tail %d, reader %d", tail, rd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	big := MinRingBytes - dist.HeaderSize
	if err := ts[0].Send(ctx, 1, frame(0, 1, 6, 0, big)); err != nil {
		t.Fatalf("a ring-sized frame after the release: %v", err)
	}
	f, err := ts[1].Recv(ctx, 6, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkFrame(f, 0, 1, 6, 0, big); err != nil {
		t.Fatal(err)
	}
}

// A payload that would cross the ring's end cannot be handed out in one piece: it is copied
// out as any frame, with the same bytes, and the stream goes on.
func TestPayloadAcrossTheRingsEndIsCopiedNotLent(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, func(c *Config) { c.RingBytes = MinRingBytes })
	in := ts[1].peers[0].in
	const n = 10000 // 7 frames of n+48 bytes cross the 64 KiB ring's end once
	lent, copied := 0, 0
	_, releases := lendAndSend(t, ts, 7, n, func(f *dist.Frame) {
		if inRing(in, f.Payload) {
			lent++
		} else {
			copied++
		}
	})
	for _, release := range releases {
		release()
	}
	if copied != 1 || lent != 6 || ts[1].Stats().Lent != 6 {
		t.Fatalf("%d lent (stats %d), %d copied; want 6 and 1", lent, ts[1].Stats().Lent, copied)
	}
}

// Close with a loan still out waits for it within its bound and then leaves the ring mapped,
// so a late hand-back or read touches memory that is still there instead of crashing.
func TestCloseWithALoanOut(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, nil)
	fs, releases := lendAndSend(t, ts, 1, 1000, nil)
	t0 := time.Now()
	ts[1].Close()
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("Close took %v with a loan out", d)
	}
	if err := checkFrame(fs[0], 0, 1, 5, 0, 1000); err != nil {
		t.Fatalf("the lent payload after Close: %v", err)
	}
	ts[1].Recycle(fs[0])
	releases[0]()
}

// A payload that does not start at an 8-byte boundary of the ring (a frame of odd length went
// before it) is copied out, so the reduction never views misaligned memory as floats.
func TestMisalignedPayloadIsCopiedNotLent(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts[0].Send(ctx, 1, frame(0, 1, 9, 0, 1001)); err != nil {
		t.Fatal(err)
	}
	f, err := ts[1].Recv(ctx, 9, 0)
	if err != nil {
		t.Fatal(err)
	}
	ts[1].Recycle(f)
	_, releases := lendAndSend(t, ts, 1, 1000, func(f *dist.Frame) {
		if inRing(ts[1].peers[0].in, f.Payload) {
			t.Error("a payload at a misaligned ring offset was lent")
		}
	})
	releases[0]()
	if got := ts[1].Stats().Lent; got != 0 {
		t.Fatalf("lent %d frames, want 0", got)
	}
}

// While a payload is lent, the producer may fill the rest of the ring but never its bytes: a
// sender that needs them waits (here until its deadline, E_TIMEOUT_COMM, the frame untorn), the
// lent payload still reads as sent, and once it is recycled the same send goes through.
func TestALentPayloadIsNeverOverwritten(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, func(c *Config) { c.RingBytes = MinRingBytes })
	fs, releases := lendAndSend(t, ts, 1, 1000, nil)
	defer releases[0]()
	const n = 8 << 10 // a whole frame per write (under a quarter of the ring)
	sent := 0
	for ; sent < 3*MinRingBytes/n; sent++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := ts[0].SendSummed(ctx, 1, frame(0, 1, 6, uint64(sent), n))
		cancel()
		if err != nil {
			wantTimeoutComm(t, err, 1)
			break
		}
		f, err := ts[1].Recv(context.Background(), 6, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkFrame(f, 0, 1, 6, uint64(sent), n); err != nil {
			t.Fatal(err)
		}
		ts[1].Recycle(f)
	}
	if sent == 3*MinRingBytes/n || sent < MinRingBytes/n-2 {
		t.Fatalf("%d frames of %d bytes went in with 1000 bytes lent in a %d-byte ring", sent, n, MinRingBytes)
	}
	if err := checkFrame(fs[0], 0, 1, 5, 0, 1000); err != nil {
		t.Fatalf("the lent payload after the ring filled: %v", err)
	}
	ts[1].Recycle(fs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts[0].SendSummed(ctx, 1, frame(0, 1, 6, uint64(sent), n)); err != nil {
		t.Fatalf("the send after the loan came back: %v", err)
	}
	f, err := ts[1].Recv(ctx, 6, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkFrame(f, 0, 1, 6, uint64(sent), n); err != nil {
		t.Fatal(err)
	}
}

// A lent frame comes out unchecked: its checksum is the reducer's, computed over the ring's
// bytes as it adds them (dist.Frame.DeferSum). A flip anywhere in such a payload, past the
// first of the pieces the reducer checksums and adds, or in a frame that carries several
// contributions (checksummed whole before any is added), is still E_DESYNC naming crc.
func TestFlipInALentPayloadIsDesyncCRCWhereverItIs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes int // each rank's buffer
		parts int // contributions per rank (AllReduceMulti)
		at    int // the flipped payload byte of rank 0's first frame to rank 1
	}{
		{"first piece", 64 << 10, 1, 100},
		{"a later piece", 256 << 10, 1, 100<<10 + 3},
		{"the last byte", 256 << 10, 1, 128<<10 - 1},
		{"two contributions", 64 << 10, 2, 40<<10 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, errsOut := allReduceWithAFlip(t, tc.bytes, tc.parts, tc.at)
			if err := errsOut[1]; errs.CodeOf(err) != errs.Desync || dist.DesyncField(err) != "crc" {
				t.Fatalf("rank 1: got %v, want E_DESYNC naming crc", err)
			}
			if got := ts[1].Stats().Lent; got < 1 {
				t.Fatalf("rank 1 lent %d frames, want the corrupted one read in place", got)
			}
		})
	}
}
