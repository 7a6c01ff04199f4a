package dist

import (
	"bytes"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// A transport's received sum replaces the check's own pass over the payload, so a frame whose
// recorded sum disagrees with its header is E_DESYNC naming crc even when the payload itself
// would pass: the check must trust the sum, and the sum must then be the received bytes'.
func TestReceivedSumIsWhatCheckCompares(t *testing.T) {
	p := []byte("some payload bytes that travelled")
	f := &Frame{Header: Header{Comm: 1, Seq: 2, Op: OpSend, DType: numerics.I8, Count: uint64(len(p)), CRC: Checksum(p)}, Payload: p}
	want := Expect{Comm: 1, Seq: 2, Op: OpSend, DType: numerics.I8, Count: len(p)}
	if fe := want.Check(f); fe != nil {
		t.Fatalf("intact frame: %v", fe)
	}
	f.SetReceivedSum(Checksum(p) ^ 1)
	if fe := want.Check(f); fe == nil || fe.Field != "crc" {
		t.Fatalf("frame with a wrong received sum: got %v, want a crc error", fe)
	}
	f.SetReceivedSum(Checksum(p))
	if fe := want.Check(f); fe != nil {
		t.Fatalf("frame with its right received sum: %v", fe)
	}
}

// A frame whose checksum is left to its consumer (DeferSum) passes Check's header fields without
// a crc verdict, and the consumer's CheckSum over the bytes it read decides: the header's CRC
// passes, any other sum is the crc error Check would have given.
func TestDeferredSumIsTheConsumersToCheck(t *testing.T) {
	p := []byte("a payload read in place")
	f := &Frame{Header: Header{Comm: 1, Seq: 2, Op: OpSend, DType: numerics.I8, Count: uint64(len(p)), CRC: Checksum(p) ^ 4}, Payload: p}
	want := Expect{Comm: 1, Seq: 2, Op: OpSend, DType: numerics.I8, Count: len(p)}
	if fe := want.Check(f); fe == nil || fe.Field != "crc" {
		t.Fatalf("undeferred frame with a bad CRC: got %v, want a crc error", fe)
	}
	f.DeferSum()
	if !f.Deferred() {
		t.Fatal("DeferSum did not mark the frame")
	}
	if fe := want.Check(f); fe != nil {
		t.Fatalf("deferred frame: Check gave %v, want the crc left to the consumer", fe)
	}
	if fe := f.CheckSum(UpdateChecksum(Checksum(p[:5]), p[5:])); fe == nil || fe.Field != "crc" {
		t.Fatalf("consumer's sum of the bytes against a bad header CRC: got %v, want a crc error", fe)
	}
	f.CRC = Checksum(p)
	if fe := f.CheckSum(UpdateChecksum(Checksum(p[:5]), p[5:])); fe != nil {
		t.Fatalf("consumer's sum in two pieces against the right CRC: %v", fe)
	}
	f.Count++ // a header field still fails Check on a deferred frame
	if fe := want.Check(f); fe == nil || fe.Field != "count" {
		t.Fatalf("deferred frame with a wrong count: got %v, want a count error", fe)
	}
}

// The fused copies give the bytes of copy and the checksum of crc32 over them, for lengths
// around the piece size.
func TestCopySumsEqualCopyThenChecksum(t *testing.T) {
	for _, n := range []int{0, 1, copyPiece - 1, copyPiece, 3*copyPiece + 17} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*131 + i>>7)
		}
		for name, fn := range map[string]func(uint32, []byte, []byte) uint32{"dst": CopySumDst, "src": CopySumSrc} {
			dst := make([]byte, n)
			if got := fn(0, dst, src); got != Checksum(src) || !bytes.Equal(dst, src) {
				t.Fatalf("CopySum%s of %d bytes: crc %08x want %08x, bytes equal %v", name, n, got, Checksum(src), bytes.Equal(dst, src))
			}
			// In two calls, as a ring copies a piece up to its end and then the rest.
			h := n / 3
			crc := fn(fn(0, dst[:h], src[:h]), dst[h:], src[h:])
			if crc != Checksum(src) {
				t.Fatalf("CopySum%s of %d bytes in two calls: crc %08x want %08x", name, n, crc, Checksum(src))
			}
		}
	}
}
