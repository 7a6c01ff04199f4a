package dist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Op names a collective (or point-to-point) operation on the wire.
type Op uint8

const (
	OpInvalid Op = iota
	OpAllReduce
	OpAllGather
	OpReduceScatter
	OpBroadcast
	OpAllToAll
	OpSend
	OpBarrier
	OpReduce // the reduce-scatter phase of all_reduce
	OpAbort  // a rank gave up on the call; the payload says why
	opLimit
)

var opNames = [...]string{OpInvalid: "invalid", OpAllReduce: "all_reduce", OpAllGather: "all_gather",
	OpReduceScatter: "reduce_scatter", OpBroadcast: "broadcast", OpAllToAll: "all_to_all",
	OpSend: "send", OpBarrier: "barrier", OpReduce: "reduce", OpAbort: "abort"}

func (o Op) String() string {
	if o < opLimit {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// RedOp is a reduction operator.
type RedOp uint8

const (
	RedNone RedOp = iota
	Sum
	Max
	Min
	Avg
	redLimit
)

var redNames = [...]string{RedNone: "none", Sum: "sum", Max: "max", Min: "min", Avg: "avg"}

func (r RedOp) String() string {
	if r < redLimit {
		return redNames[r]
	}
	return fmt.Sprintf("redop(%d)", uint8(r))
}

// ParseRedOp accepts sum, max, min, avg.
func ParseRedOp(s string) (RedOp, error) {
	for i := Sum; i < redLimit; i++ {
		if redNames[i] == s {
			return i, nil
		}
	}
	return RedNone, errs.New(errs.Input, "unknown reduction %q (want sum, max, min or avg)", s)
}

// HeaderSize is the fixed size of an encoded Header.
const HeaderSize = 48

const (
	frameMagic   = 0x54514644 // "TQFD"
	frameVersion = 2          // 2: Part, the frame's place in its stream
)

// Header travels in front of every payload. Every field is checked by the receiving
// communicator: a frame that is not the one the receiver expects is E_DESYNC, never data.
type Header struct {
	Comm  uint32         // communicator id
	Seq   uint64         // the communicator's collective sequence number
	Op    Op             // the collective this frame belongs to
	Red   RedOp          // its reduction, RedNone for data-only ops
	DType numerics.DType // element type of the payload
	Src   uint16         // sending rank within the communicator
	Aux   uint32         // op-specific: root for broadcast, number of contributions for reductions
	Count uint64         // elements in the payload
	CRC   uint32         // CRC32C (Castagnoli) of the payload
	// Part is the frame's place among the frames one call sends one peer, counted across the
	// call's phases: the segments of a pipelined reduction's two phases, 0 where a call sends
	// one frame. Without it two segments of equal size swapped in transit were each a valid
	// frame, and became data.
	Part uint32
}

// Frame is one message: a header and its payload (Count*DType.Size() bytes).
type Frame struct {
	Header
	Payload []byte
	// sum is the CRC32C of Payload as the receiving transport computed it while it wrote
	// Payload (SetReceivedSum); Check then compares it with the header's CRC instead of
	// reading the payload a second time.
	sum    uint32
	summed bool
	// deferred: the receiving transport left the checksum to the frame's consumer, which reads
	// the payload anyway (a Lender's frame, added straight from the ring): Check skips the crc
	// field, and the consumer runs the payload through a Sum before it trusts what it made of it.
	deferred bool
	// landed: Payload is a buffer the receiver posted (Lander), not a pooled one, so it is never
	// recycled.
	landed bool
	// lent, when set, gives Payload back to the transport it aliases (Lender); recycling the
	// frame calls it.
	lent func()
}

// SetLanded marks f's payload as the receiver's own buffer (a Lander wrote it there).
func (f *Frame) SetLanded() { f.landed = true }

// SetLent marks f's payload as the transport's own memory, read in place (a Lender put it
// there): give is what hands it back, once; recycling f calls it.
func (f *Frame) SetLent(give func()) { f.lent = give }

// EndLoan hands a lent payload back to its transport and drops it from f; it reports whether
// f was lent (a Recycler must then not pool the payload: it is the transport's memory).
func (f *Frame) EndLoan() bool {
	if f.lent == nil {
		return false
	}
	f.lent()
	f.lent, f.Payload = nil, nil
	return true
}

// SetReceivedSum records crc as the CRC32C of f.Payload, computed by the receiving transport
// over the very bytes it wrote into f.Payload (not over its source: a bit that flips between
// the source and the payload must still show). A layer that changes a received payload must
// build its frame from the header and the new payload (Frame{Header: h, Payload: p}), which
// has no sum, never copy the received Frame.
func (f *Frame) SetReceivedSum(crc uint32) { f.sum, f.summed = crc, true }

// DeferSum leaves f's checksum to its consumer (a Lender does, for a loan whose consumer
// checksums the payload while it reduces it: one read of the transport's memory, not two).
func (f *Frame) DeferSum() { f.deferred = true }

// Deferred reports whether f's checksum is still to be checked by its consumer (CheckSum).
func (f *Frame) Deferred() bool { return f.deferred }

// CheckSum compares crc, the CRC32C of the whole payload as the consumer read it, with the
// header's: the crc field's FieldError of Check when they differ.
func (f *Frame) CheckSum(crc uint32) *FieldError {
	if crc == f.CRC || failpoint.Enabled(failpoint.DistFrameCRCUnchecked) {
		return nil
	}
	return &FieldError{Field: "crc", Got: fmt.Sprintf("%08x", crc), Want: fmt.Sprintf("%08x", f.CRC),
		Why: "the payload was corrupted in transit and is discarded"}
}

// payloadSum is the payload's CRC32C, computed now unless the transport already did.
func (f *Frame) payloadSum() uint32 {
	if f.summed {
		return f.sum
	}
	return Checksum(f.Payload)
}

// CopySumDst copies src into dst (len(dst) <= len(src)) and returns crc updated with the bytes
// written to dst, in pieces small enough that the checksum reads each one from L1 right after
// the copy wrote it: one pass over the bytes instead of a copy and a checksum pass. A receiver
// checksums what it wrote, the bytes it will use.
func CopySumDst(crc uint32, dst, src []byte) uint32 {
	for len(dst) > 0 {
		k := min(copyPiece, len(dst))
		copy(dst[:k], src[:k])
		crc = crc32.Update(crc, castagnoli, dst[:k])
		dst, src = dst[k:], src[k:]
	}
	return crc
}

// CopySumSrc is CopySumDst for a sender: the checksum is of src, the caller's bytes, read
// piece by piece before the copy reads the same piece from L1.
func CopySumSrc(crc uint32, dst, src []byte) uint32 {
	for len(dst) > 0 {
		k := min(copyPiece, len(dst))
		crc = crc32.Update(crc, castagnoli, src[:k])
		copy(dst[:k], src[:k])
		dst, src = dst[k:], src[k:]
	}
	return crc
}

const copyPiece = 16 << 10

// A SummingSender computes a payload's checksum while it copies the payload (the shm rings),
// so the sender's bytes are read once, not once for the checksum and once for the copy.
type SummingSender interface {
	// SendSummed is Send for a frame whose CRC is not set yet: the transport sets it to the
	// CRC32C of f.Payload and sends the frame with it.
	SendSummed(ctx context.Context, to int, f *Frame) error
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC32C of a payload.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// UpdateChecksum is crc (a Checksum of the bytes before p) updated with p.
func UpdateChecksum(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// PayloadLen is the byte length the header announces.
func (h *Header) PayloadLen() (int, error) {
	sz := h.DType.Size()
	if !h.DType.Valid() || sz == 0 {
		return 0, errs.New(errs.Desync, "frame from rank %d: invalid dtype %d", h.Src, uint8(h.DType))
	}
	if h.Count > MaxFrameBytes/uint64(sz) {
		return 0, errs.New(errs.Desync, "frame from rank %d: %d elements of %s exceed the %d-byte frame limit", h.Src, h.Count, h.DType, MaxFrameBytes)
	}
	return int(h.Count) * sz, nil
}

// MaxFrameBytes bounds one payload so a corrupted length can never make a receiver allocate
// without limit.
const MaxFrameBytes = 1 << 31

// MarshalHeader encodes h into b (len >= HeaderSize), little-endian.
func (h *Header) MarshalHeader(b []byte) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], frameMagic)
	b[4] = frameVersion
	b[5] = byte(h.Op)
	b[6] = byte(h.Red)
	b[7] = byte(h.DType)
	le.PutUint32(b[8:], h.Comm)
	le.PutUint16(b[12:], h.Src)
	le.PutUint16(b[14:], 0)
	le.PutUint64(b[16:], h.Seq)
	le.PutUint64(b[24:], h.Count)
	le.PutUint32(b[32:], h.Aux)
	le.PutUint32(b[36:], h.CRC)
	le.PutUint32(b[40:], h.Part)
	// The header checks itself: a flipped bit in a length must not be trusted.
	le.PutUint32(b[44:], crc32.Checksum(b[:44], castagnoli))
}

// UnmarshalHeader decodes and validates a header; errors are E_DESYNC.
func UnmarshalHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, errs.New(errs.Desync, "frame header: %d bytes, want %d", len(b), HeaderSize)
	}
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != frameMagic {
		return h, errs.New(errs.Desync, "frame header: bad magic %#x", le.Uint32(b[0:]))
	}
	if b[4] != frameVersion {
		return h, errs.New(errs.Desync, "frame header: version %d, want %d", b[4], frameVersion)
	}
	if got, want := le.Uint32(b[44:]), crc32.Checksum(b[:44], castagnoli); got != want {
		return h, errs.New(errs.Desync, "frame header: checksum %#x, want %#x (corrupted in transit)", got, want)
	}
	h.Op, h.Red, h.DType = Op(b[5]), RedOp(b[6]), numerics.DType(b[7])
	h.Comm = le.Uint32(b[8:])
	h.Src = le.Uint16(b[12:])
	h.Seq = le.Uint64(b[16:])
	h.Count = le.Uint64(b[24:])
	h.Aux = le.Uint32(b[32:])
	h.CRC = le.Uint32(b[36:])
	h.Part = le.Uint32(b[40:])
	if h.Op == OpInvalid || h.Op >= opLimit || h.Red >= redLimit {
		return h, errs.New(errs.Desync, "frame header: unknown op %d or reduction %d", b[5], b[6])
	}
	if _, err := h.PayloadLen(); err != nil {
		return h, err
	}
	return h, nil
}

func (h Header) String() string {
	return fmt.Sprintf("%s #%d comm=%d src=%d %s count=%d red=%s aux=%d part=%d", h.Op, h.Seq, h.Comm, h.Src, h.DType, h.Count, h.Red, h.Aux, h.Part)
}

// FieldError is the cause of an E_DESYNC that a receiver raised because one field of a frame
// was not what the call expects: which field, what came, what was expected, and what the
// difference suggests happened.
type FieldError struct {
	Field     string // comm, src, seq, op, red, dtype, part, aux, count, length, crc
	Got, Want string
	Why       string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("header field %s is %s, expected %s: %s", e.Field, e.Got, e.Want, e.Why)
}

// DesyncField is the frame field an E_DESYNC names, or "" when err names none.
func DesyncField(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

// DesyncError is the E_DESYNC a receiver raises for fe, found in a frame from rank from; where
// says which rank and call received it.
func DesyncError(where string, from int, fe *FieldError) error {
	return &errs.Error{Code: errs.Desync, Err: fe, Msg: fmt.Sprintf("%s: frame from rank %d: %s", where, from, fe)}
}

// Expect is what a receiver expects of the next frame on a link. Every transport's receivers
// check frames through it, so each field is checked in one place and named the same way.
type Expect struct {
	Comm  uint32
	Src   uint16
	Seq   uint64
	Op    Op
	Red   RedOp
	DType numerics.DType
	Part  uint32
	Aux   uint32
	// CheckAux: Aux must equal Aux (a phase, a root); otherwise the caller checks it.
	CheckAux bool
	// Count < 0 accepts any count.
	Count int
}

// Check compares f with e one field at a time, in the order that names the likeliest cause
// first (a frame of another call is a seq error, a frame of another place in this call a part
// error, not an op error), then the payload's length and checksum. nil: f is the frame
// expected.
func (e Expect) Check(f *Frame) *FieldError {
	h := f.Header
	bad := func(field string, got, want any, why string) *FieldError {
		return &FieldError{Field: field, Got: fmt.Sprint(got), Want: fmt.Sprint(want), Why: why}
	}
	switch {
	case h.Comm != e.Comm:
		return bad("comm", h.Comm, e.Comm, "a frame of another communicator was delivered to this one")
	case h.Src != e.Src:
		return bad("src", h.Src, e.Src, "the frame names another sender than the one it came from")
	case h.Seq < e.Seq && !failpoint.Enabled(failpoint.DistFrameSeqUnchecked):
		return bad("seq", h.Seq, e.Seq, "a frame of an earlier call: duplicated or replayed")
	case h.Seq > e.Seq && !failpoint.Enabled(failpoint.DistFrameSeqUnchecked):
		return bad("seq", h.Seq, e.Seq, "a frame of a later call: a frame of this one was lost, or the ranks made different numbers of calls")
	case h.Part < e.Part && !failpoint.Enabled(failpoint.DistFramePartUnchecked):
		return bad("part", h.Part, e.Part, "a part this call already had: duplicated, replayed or reordered")
	case h.Part > e.Part && !failpoint.Enabled(failpoint.DistFramePartUnchecked):
		return bad("part", h.Part, e.Part, "a later part: reordered, or one was lost")
	case h.Op != e.Op:
		return bad("op", h.Op, e.Op, "the ranks called different collectives")
	case h.Red != e.Red:
		return bad("red", h.Red, e.Red, "the ranks called with different reductions")
	case h.DType != e.DType && !failpoint.Enabled(failpoint.DistFrameDTypeUnchecked):
		return bad("dtype", h.DType, e.DType, "the ranks called with different dtypes")
	case e.CheckAux && h.Aux != e.Aux:
		return bad("aux", h.Aux, e.Aux, "the ranks are in different phases or called with different roots")
	case e.Count >= 0 && h.Count != uint64(e.Count):
		return bad("count", h.Count, e.Count, "the ranks called with different counts")
	}
	if n, err := h.PayloadLen(); err != nil || n != len(f.Payload) {
		return bad("length", len(f.Payload), fmt.Sprintf("%d (%d elements)", n, h.Count), "the payload is not as long as its header says")
	}
	if f.deferred {
		return nil // the consumer checks it as it reads (DeferSum)
	}
	return f.CheckSum(f.payloadSum())
}
