package chaos

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The net/* faults act on the rank's real outgoing frames, between its communicator (which
// checksummed them) and its transport (which writes them to the socket or the peer's queue):
// what the receiving communicator's checks must catch.

// frameWait bounds how long an armed one-frame fault waits for a frame to act on.
const frameWait = 30 * time.Second

func netAvailable(name string, r Run) error {
	if r.World < 2 {
		return unsupported("%s: a world of one sends no frames", name)
	}
	return nil
}

// Drop is net/drop: the next Frames frames (default 1) the rank sends (to peer To, or any
// when To is -1 or unset) are lost. A receiver then waits for a frame that never comes
// (E_TIMEOUT_COMM) or gets the following frame where it expected the lost one (E_DESYNC).
type Drop struct {
	Frames int  `json:"frames,omitempty"`
	To     *int `json:"to,omitempty"`
}

func (*Drop) Name() string          { return "net/drop" }
func (*Drop) Site() Site            { return SiteRank }
func (*Drop) Available(r Run) error { return netAvailable("net/drop", r) }
func (*Drop) Expect(Run) Expect {
	return Expect{Detect: codes(errs.TimeoutComm, errs.Desync), Fields: []string{"seq", "part"}, Restart: true}
}
func (d *Drop) Inject(ctx context.Context, t Target) (string, error) {
	n := max(d.Frames, 1)
	to := -1
	if d.To != nil {
		to = *d.To
	}
	r, disarm := t.Tap().arm(n, dataFrame(to), func(context.Context, int, *dist.Frame) []*dist.Frame { return nil })
	defer disarm()
	select {
	case <-r.hit:
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(frameWait):
		return "", fmt.Errorf("net/drop: no frame to drop within %s", frameWait)
	}
	return "dropped " + r.what, nil
}

// Corrupt is net/corrupt: one bit of the next frame's payload is flipped in transit (Bit:
// which bit of the payload, default the middle one). The receiver's CRC32C check must refuse
// it (E_DESYNC): a corrupted message never reaches the parameters.
type Corrupt struct {
	Bit  int `json:"bit,omitempty"`
	Skip int `json:"skip,omitempty"` // let this many frames pass first (0: the next frame)
}

func (*Corrupt) Name() string          { return "net/corrupt" }
func (*Corrupt) Site() Site            { return SiteRank }
func (*Corrupt) Available(r Run) error { return netAvailable("net/corrupt", r) }
func (*Corrupt) Expect(Run) Expect {
	return Expect{Detect: codes(errs.Desync), Fields: []string{"crc"}, Restart: true}
}
func (c *Corrupt) Inject(ctx context.Context, t Target) (string, error) {
	tp := t.Tap()
	var flipped int
	skip := c.Skip
	var mu sync.Mutex
	match := func(to int, f *dist.Frame) bool {
		if !dataFrame(-1)(to, f) {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		skip--
		return skip < 0
	}
	what, err := tp.armOnce(ctx, frameWait, match, func(_ context.Context, _ int, f *dist.Frame) []*dist.Frame {
		g := *f
		g.Payload = slices.Clone(f.Payload)
		bit := c.Bit
		if bit <= 0 || bit >= 8*len(g.Payload) {
			bit = 8*(len(g.Payload)/2) + 3
		}
		g.Payload[bit/8] ^= 1 << (bit % 8)
		flipped = bit
		if tp.plant == PlantAcceptBadChecksum {
			g.CRC = dist.Checksum(g.Payload) // the planted bug: the bad frame passes as good
		}
		return []*dist.Frame{&g}
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("flipped payload bit %d of %s", flipped, what), nil
}

// Duplicate is net/duplicate: the next frame is sent twice. The receiver's sequence and
// header checks must refuse the copy (E_DESYNC): a message is never applied twice.
type Duplicate struct{}

func (*Duplicate) Name() string          { return "net/duplicate" }
func (*Duplicate) Site() Site            { return SiteRank }
func (*Duplicate) Available(r Run) error { return netAvailable("net/duplicate", r) }
func (*Duplicate) Expect(Run) Expect {
	return Expect{Detect: codes(errs.Desync, errs.TimeoutComm), Fields: []string{"seq", "part"}, Restart: true}
}
func (*Duplicate) Inject(ctx context.Context, t Target) (string, error) {
	what, err := t.Tap().armOnce(ctx, frameWait, dataFrame(-1), func(_ context.Context, _ int, f *dist.Frame) []*dist.Frame {
		return []*dist.Frame{f, f}
	})
	if err != nil {
		return "", err
	}
	return "sent twice: " + what, nil
}

// Delay is net/delay: the next frame is held back for By (default twice the collectives'
// bound) before it goes out. Longer than the bound, the receiver must give up on the sender
// (E_TIMEOUT_COMM); shorter, the job must only be slower.
type Delay struct {
	By Duration `json:"by,omitempty"`
}

func (*Delay) Name() string          { return "net/delay" }
func (*Delay) Site() Site            { return SiteRank }
func (*Delay) Available(r Run) error { return netAvailable("net/delay", r) }
func (d *Delay) by(r Run) time.Duration {
	if d.By > 0 {
		return time.Duration(d.By)
	}
	return 2 * r.CommTimeout
}
func (d *Delay) Expect(r Run) Expect {
	if d.by(r) > r.CommTimeout {
		return Expect{Detect: codes(errs.TimeoutComm), Restart: true}
	}
	return Expect{}
}
func (d *Delay) Inject(ctx context.Context, t Target) (string, error) {
	by := time.Duration(d.By)
	if by <= 0 {
		by = d.by(t.Run())
	}
	what, err := t.Tap().armOnce(ctx, frameWait, dataFrame(-1), func(fctx context.Context, _ int, f *dist.Frame) []*dist.Frame {
		sleepCtx(fctx, by)
		return []*dist.Frame{f}
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("held %s for %s", what, by), nil
}

// Partition is net/partition: for For (default: until the group restarts) no frame crosses
// between the ranks in Side (default: the injection's rank alone) and the others, in either
// direction: every rank drops its own frames across the cut. Both sides must give up on the
// other (E_TIMEOUT_COMM); frames lost in the cut are never resent, so a healed partition is
// still detected (E_DESYNC or E_TIMEOUT_COMM).
type Partition struct {
	Side []int    `json:"side,omitempty"`
	For  Duration `json:"for,omitempty"`
}

func (*Partition) Name() string          { return "net/partition" }
func (*Partition) Site() Site            { return SiteEveryRank }
func (*Partition) Available(r Run) error { return netAvailable("net/partition", r) }
func (*Partition) Expect(Run) Expect {
	return Expect{Detect: codes(errs.TimeoutComm, errs.Desync), Restart: true}
}
func (p *Partition) side(t Target) []int {
	if len(p.Side) > 0 {
		return p.Side
	}
	return []int{t.Rank()}
}
func (p *Partition) Inject(ctx context.Context, t Target) (string, error) {
	side := p.side(t)
	mine := slices.Contains(side, t.Self())
	_, disarm := t.Tap().arm(-1, func(to int, f *dist.Frame) bool {
		return slices.Contains(side, to) != mine
	}, func(context.Context, int, *dist.Frame) []*dist.Frame { return nil })
	defer disarm()
	start := time.Now()
	if p.For > 0 {
		sleepCtx(ctx, time.Duration(p.For))
	} else {
		<-ctx.Done()
	}
	return fmt.Sprintf("ranks %v cut off from the others for %s", side, time.Since(start).Round(time.Millisecond)), nil
}

// NaN is device/nan: the rank's device returns a NaN in what it computed: the first element
// of the next floating-point payload it contributes to a reduction becomes NaN before the
// frame is checksummed (the wire is fine, the number is not). The NaN/Inf guard must refuse
// the step on every rank (E_NAN_INF) before the parameters are touched.
type NaN struct{}

func (*NaN) Name() string          { return "device/nan" }
func (*NaN) Site() Site            { return SiteRank }
func (*NaN) Available(r Run) error { return netAvailable("device/nan", r) }
func (*NaN) Expect(Run) Expect     { return Expect{Detect: codes(errs.NaNInf), Restart: true} }
func (*NaN) Inject(ctx context.Context, t Target) (string, error) {
	match := func(to int, f *dist.Frame) bool {
		return dataFrame(-1)(to, f) && (f.Op == dist.OpReduce || f.Op == dist.OpAllReduce) && nanBits(f.DType) != nil
	}
	what, err := t.Tap().armOnce(ctx, frameWait, match, func(_ context.Context, _ int, f *dist.Frame) []*dist.Frame {
		g := *f
		g.Payload = slices.Clone(f.Payload)
		copy(g.Payload, nanBits(f.DType))
		g.CRC = dist.Checksum(g.Payload)
		return []*dist.Frame{&g}
	})
	if err != nil {
		return "", err
	}
	return "NaN in the first element of " + what, nil
}

// nanBits is a quiet NaN of dt, little-endian; nil for dtypes without NaN.
func nanBits(dt numerics.DType) []byte {
	switch dt {
	case numerics.F32:
		return binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.NaN())))
	case numerics.F64:
		return binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN()))
	case numerics.F16:
		return []byte{0x00, 0x7e}
	case numerics.BF16:
		return []byte{0xc0, 0x7f}
	}
	return nil
}
