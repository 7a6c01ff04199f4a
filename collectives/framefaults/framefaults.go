// Package framefaults checks that a receiver refuses every frame that is wrong in one header
// field, naming that field: for each field a fault changes that field alone on real frames of
// a real transport (dist.Intercept on the sender, or a wrapper on the receiver's side for
// misdelivery) and keeps everything else valid, checksum included, so only the check of that
// one field can catch it. The catalogue is data (Faults); Run plays one fault on inproc or tcp.
package framefaults

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/sharded"
)

// World is the number of ranks every fault runs on; rank Culprit's frames to rank Victim are
// the ones changed.
const (
	World   = 3
	Culprit = 1
	Victim  = 0
)

// segmentElems is the engine's pipeline segment in f32 elements (1 MiB): the pipelined
// faults make every rank's chunk span three of them.
const segmentElems = 1 << 18

// Call is the pair of collectives every fault's world runs, the same on every rank: the
// second call is where a replayed or duplicated frame of the first shows up.
type Call string

const (
	CallAllGather Call = "all_gather" // one frame per peer per call
	CallAllReduce Call = "all_reduce" // pipelined: three segments per peer per phase
	CallBroadcast Call = "broadcast"  // from root Culprit
)

// Fault changes one field of the frames Culprit sends Victim.
type Fault struct {
	Name  string
	Field string // the dist.FieldError field the victim must name
	Call  Call
	// Hook builds the sender-side change (a fresh one per run: hooks keep state).
	Hook func() dist.Hook
	// Deliver, instead of Hook, changes frames as the victim receives them.
	Deliver func(*dist.Frame) *dist.Frame
	// Transports lists where the fault can be expressed ("" means both); tcp frames a payload
	// by its header's count, so a payload shorter than its header exists only in process.
	Transports []string
}

// relabel returns a valid frame like f with its header changed by edit and, when payload is
// not nil, that payload (its checksum recomputed: only the edited field is wrong).
func relabel(f *dist.Frame, edit func(*dist.Header), payload []byte) *dist.Frame {
	g := &dist.Frame{Header: f.Header, Payload: append([]byte(nil), f.Payload...)}
	if payload != nil {
		g.Payload = payload
		g.Count = uint64(len(payload) / f.DType.Size())
	}
	edit(&g.Header)
	g.CRC = dist.Checksum(g.Payload)
	return g
}

// nth applies change to the n-th (1-based) frame Culprit sends Victim under op (any op when
// op is dist.OpInvalid) and passes every other frame on.
func nth(op dist.Op, n int, change func(f *dist.Frame) []*dist.Frame) func() dist.Hook {
	return func() dist.Hook {
		var mu sync.Mutex
		seen := 0
		return func(ctx context.Context, to int, f *dist.Frame) []*dist.Frame {
			if to != Victim || (op != dist.OpInvalid && f.Op != op) {
				return []*dist.Frame{f}
			}
			mu.Lock()
			seen++
			hit := seen == n
			mu.Unlock()
			if hit {
				return change(f)
			}
			return []*dist.Frame{f}
		}
	}
}

func edit(op dist.Op, n int, e func(*dist.Header)) func() dist.Hook {
	return nth(op, n, func(f *dist.Frame) []*dist.Frame { return []*dist.Frame{relabel(f, e, nil)} })
}

// Faults is the catalogue: every field the receiver checks, each violated alone.
var Faults = []Fault{
	{Name: "duplicated-frame", Field: "seq", Call: CallAllGather,
		Hook: nth(dist.OpAllGather, 1, func(f *dist.Frame) []*dist.Frame { return []*dist.Frame{f, relabel(f, func(*dist.Header) {}, nil)} })},
	{Name: "replayed-older-frame", Field: "seq", Call: CallAllGather, Hook: replayFirst},
	{Name: "reordered-segments", Field: "part", Call: CallAllReduce, Hook: swapFirstTwo},
	{Name: "duplicated-segment", Field: "part", Call: CallAllReduce,
		Hook: nth(dist.OpReduce, 1, func(f *dist.Frame) []*dist.Frame { return []*dist.Frame{f, relabel(f, func(*dist.Header) {}, nil)} })},
	{Name: "other-sender", Field: "src", Call: CallAllGather, Hook: edit(dist.OpAllGather, 1, func(h *dist.Header) { h.Src = 2 })},
	{Name: "other-collective", Field: "op", Call: CallAllGather, Hook: edit(dist.OpAllGather, 1, func(h *dist.Header) { h.Op = dist.OpAllToAll })},
	{Name: "other-reduction", Field: "red", Call: CallAllReduce, Hook: edit(dist.OpReduce, 1, func(h *dist.Header) { h.Red = dist.Max })},
	// f32 and int32 have the same size: the count and the payload still fit.
	{Name: "other-dtype", Field: "dtype", Call: CallAllGather, Hook: edit(dist.OpAllGather, 1, func(h *dist.Header) { h.DType = numerics.I32 })},
	{Name: "other-count", Field: "count", Call: CallAllGather,
		Hook: nth(dist.OpAllGather, 1, func(f *dist.Frame) []*dist.Frame {
			return []*dist.Frame{relabel(f, func(*dist.Header) {}, append([]byte(nil), f.Payload[:len(f.Payload)-4]...))}
		})},
	{Name: "other-root", Field: "aux", Call: CallBroadcast, Hook: edit(dist.OpBroadcast, 1, func(h *dist.Header) { h.Aux = 2 })},
	{Name: "corrupted-payload", Field: "crc", Call: CallAllGather,
		Hook: nth(dist.OpAllGather, 1, func(f *dist.Frame) []*dist.Frame {
			g := &dist.Frame{Header: f.Header, Payload: append([]byte(nil), f.Payload...)}
			g.Payload[len(g.Payload)/2] ^= 0x10
			return []*dist.Frame{g}
		})},
	{Name: "short-payload", Field: "length", Call: CallAllGather, Transports: []string{"inproc"},
		Hook: nth(dist.OpAllGather, 1, func(f *dist.Frame) []*dist.Frame {
			g := &dist.Frame{Header: f.Header, Payload: append([]byte(nil), f.Payload[:len(f.Payload)-4]...)}
			g.CRC = dist.Checksum(g.Payload)
			return []*dist.Frame{g}
		})},
	{Name: "misdelivered-frame", Field: "comm", Call: CallAllGather,
		Deliver: func(f *dist.Frame) *dist.Frame { return relabel(f, func(h *dist.Header) { h.Comm = 7 }, nil) }},
}

// replayFirst keeps a copy of the first all_gather frame and sends it again in place of the
// second call's: a replayed older frame.
func replayFirst() dist.Hook {
	var mu sync.Mutex
	var first *dist.Frame
	return func(ctx context.Context, to int, f *dist.Frame) []*dist.Frame {
		if to != Victim || f.Op != dist.OpAllGather {
			return []*dist.Frame{f}
		}
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = relabel(f, func(*dist.Header) {}, nil)
			return []*dist.Frame{f}
		}
		return []*dist.Frame{first}
	}
}

// swapFirstTwo holds the first reduce-phase segment and sends it after the second: two
// segments of equal size, each a valid frame, in the wrong order.
func swapFirstTwo() dist.Hook {
	var mu sync.Mutex
	var held *dist.Frame
	n := 0
	return func(ctx context.Context, to int, f *dist.Frame) []*dist.Frame {
		if to != Victim || f.Op != dist.OpReduce {
			return []*dist.Frame{f}
		}
		mu.Lock()
		defer mu.Unlock()
		n++
		switch n {
		case 1:
			held = relabel(f, func(*dist.Header) {}, nil)
			return nil
		case 2:
			return []*dist.Frame{f, held}
		}
		return []*dist.Frame{f}
	}
}

// Applies reports whether f can be expressed on transport kind.
func (f Fault) Applies(kind string) bool {
	if len(f.Transports) == 0 {
		return true
	}
	for _, k := range f.Transports {
		if k == kind {
			return true
		}
	}
	return false
}

// Outcome is what every rank's calls ended with.
type Outcome struct {
	Errs []error
	// Wrong: a rank finished both calls with bytes other than the fault-free run's.
	Wrong []int
}

// Judge says why the outcome is not a refusal of f's field by the victim, "" if it is: the
// victim fails with E_DESYNC naming f.Field, and no rank finishes with wrong data.
func (o Outcome) Judge(f Fault) string {
	if len(o.Wrong) > 0 {
		return fmt.Sprintf("ranks %v finished with wrong data: the frame became data", o.Wrong)
	}
	e := o.Errs[Victim]
	switch {
	case e == nil:
		return "the victim finished without an error"
	case errs.CodeOf(e) != errs.Desync:
		return fmt.Sprintf("the victim failed with %s, want E_DESYNC: %v", errs.CodeOf(e), e)
	case dist.DesyncField(e) != f.Field:
		return fmt.Sprintf("the victim's E_DESYNC names field %q, want %q: %v", dist.DesyncField(e), f.Field, e)
	}
	return ""
}

// Run plays f (nil: no fault) on a world of World ranks over transport kind (inproc or tcp),
// every rank making f.Call twice on seeded inputs, and compares each rank's results with the
// fault-free answer computed the same way.
func Run(ctx context.Context, kind string, f *Fault, call Call) (Outcome, error) {
	ts, closeAll, err := transports(ctx, kind)
	if err != nil {
		return Outcome{}, err
	}
	defer closeAll()
	if f != nil {
		if f.Hook != nil {
			ts[Culprit] = dist.Intercept(ts[Culprit], f.Hook())
		}
		if f.Deliver != nil {
			ts[Victim] = delivering{Transport: ts[Victim], change: f.Deliver}
		}
	}
	results := make([][]byte, World)
	out := Outcome{Errs: make([]error, World)}
	var wg sync.WaitGroup
	for r := range World {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dist.NewComm(ts[r], dist.Options{Timeout: 5 * time.Second})
			results[r], out.Errs[r] = calls(ctx, c, call)
		}()
	}
	wg.Wait()
	want := expected(call)
	for r, got := range results {
		if out.Errs[r] == nil && !bytes.Equal(got, want[r]) {
			out.Wrong = append(out.Wrong, r)
		}
	}
	return out, nil
}

func transports(ctx context.Context, kind string) ([]dist.Transport, func(), error) {
	switch kind {
	case "inproc":
		ts := dist.NewInproc(World)
		return ts, func() { closeAll(ts) }, nil
	case "tcp":
		ts, closeStore, err := sharded.TCPWorld(ctx, World, fmt.Sprintf("framefaults-%d", rand.Uint64()))
		if err != nil {
			return nil, nil, err
		}
		return ts, func() { closeAll(ts); closeStore() }, nil
	}
	return nil, nil, errs.New(errs.Input, "framefaults: transport %q (want inproc or tcp)", kind)
}

func closeAll(ts []dist.Transport) {
	for _, t := range ts {
		t.Close()
	}
}

// delivering is a receiver whose transport hands it changed frames: a misdelivery.
type delivering struct {
	dist.Transport
	change func(*dist.Frame) *dist.Frame
}

func (d delivering) Recv(ctx context.Context, comm uint32, from int) (*dist.Frame, error) {
	f, err := d.Transport.Recv(ctx, comm, from)
	if err != nil || from != Culprit {
		return f, err
	}
	return d.change(f), nil
}

// input is rank r's send buffer for call number k (0, 1).
func input(call Call, r, k int) []byte {
	n := 64
	if call == CallAllReduce {
		n = World * 3 * segmentElems
	}
	rng := rand.New(rand.NewPCG(uint64(r), uint64(k)+1))
	b := make([]byte, 4*n)
	for i := range n {
		v := float32(rng.NormFloat64())
		bits := numerics.Encode(numerics.F32, float64(v))
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
	}
	return b
}

// calls makes call twice on c and returns the two results laid end to end.
func calls(ctx context.Context, c *dist.Comm, call Call) ([]byte, error) {
	var all []byte
	for k := range 2 {
		send := input(call, c.Rank(), k)
		var recv []byte
		var err error
		switch call {
		case CallAllGather:
			recv = make([]byte, len(send)*c.World())
			err = c.AllGather(ctx, numerics.F32, send, recv)
		case CallAllReduce:
			recv = make([]byte, len(send))
			err = c.AllReduce(ctx, numerics.F32, send, recv, dist.Sum)
		case CallBroadcast:
			recv = make([]byte, len(send))
			err = c.Broadcast(ctx, numerics.F32, send, recv, Culprit)
		}
		if err != nil {
			return nil, err
		}
		all = append(all, recv...)
	}
	return all, nil
}

var (
	expectedMu sync.Mutex
	expectedOf = map[Call][][]byte{}
)

// expected is every rank's fault-free result of call, computed once per process on inproc.
func expected(call Call) [][]byte {
	expectedMu.Lock()
	defer expectedMu.Unlock()
	if r, ok := expectedOf[call]; ok {
		return r
	}
	ts := dist.NewInproc(World)
	defer closeAll(ts)
	out := make([][]byte, World)
	var wg sync.WaitGroup
	for r := range World {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[r], _ = calls(context.Background(), dist.NewComm(ts[r], dist.Options{Timeout: 5 * time.Second}), call)
		}()
	}
	wg.Wait()
	expectedOf[call] = out
	return out
}
