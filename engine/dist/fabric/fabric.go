package fabric

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
)

// Fabric is the shared state of one modeled world: every rank's clock, every rank's send
// ports (one per link class, so a rank's NVLink sends and its NIC sends queue separately),
// the arrival stamps of frames in flight, the faults in force and what went over the links.
//
// The cost of a frame from a to b of B bytes: it leaves a's port for its class once the port
// is free and a's clock has reached the send, takes B/bandwidth on the port, and arrives
// latency + jitter later (plus a resend timeout when it is lost once). In virtual time the
// arrival is a stamp the receiving rank's clock advances to when it takes the frame; in real
// time the sender is held until the arrival before the frame goes to the transport below.
// Receiving costs nothing, and neither does arithmetic in virtual time: the model is of the
// fabric, not of the ranks' compute.
type Fabric struct {
	topo    *Topology
	virtual bool
	epoch   time.Time

	mu     sync.Mutex
	clock  []time.Duration
	port   [][classLimit]time.Duration // real time: when each port is free
	busy   [][classLimit][]span        // virtual time: each port's booked spans, in order
	rng    []*rand.Rand
	stamps map[linkKey][]time.Duration
	links  map[linkKey]*sync.Mutex
	// arrived is when the last frame each link delivered arrived (the communicator's
	// per-peer wait reads it: dist.Timed).
	arrived map[linkKey]time.Duration
	faults  []Fault
	sent    []int // frames each rank sent (a corrupting NIC counts them)
	calls   []map[uint32]*callClock
	stats   Stats
}

// callClock is what a rank's clock knows of its current collective on one communicator: when
// it began on this rank and the latest arrival of a frame it has taken in the call.
//
// A send's issue time is not the rank's clock when the goroutine that sends it happens to
// run (frames of the same call may already have advanced the clock by then): a frame that
// depends only on the caller's buffer (a first phase: reduce-scatter contributions,
// all_gather and all_to_all blocks, broadcast from the root, barrier) is issued when the call
// began, a frame that carries something received (a hierarchical chain's running sum) at the
// latest arrival the rank has taken in the call. The flat all_reduce's reduced segment k
// waits for segment k's contributions only: the i-th reduced frame a rank sends to one peer
// is its segment i (dist's pipeline sends them in order), issued at the latest arrival of a
// contribution with Part i, whatever later segments the rank happened to take first.
type callClock struct {
	seq    uint64
	start  time.Duration
	arr    [depLimit]time.Duration // latest arrival taken, by the step the frame belongs to
	byPart map[uint32]time.Duration
	flat   map[int]uint32 // reduced frames sent so far, by destination
}

// The steps of the host algorithms a frame can belong to (the frame's op and Aux say which):
// a first phase, a hierarchical chain's running sum going up, its result coming down, and
// the rest (all_reduce's reduced chunks, the hierarchical gather inside a node).
const (
	depFirst = iota
	depUp
	depDown
	depOther
	depLimit
)

func depOf(fr *dist.Frame) int {
	switch fr.Op {
	case dist.OpReduceScatter, dist.OpAllGather, dist.OpBroadcast, dist.OpAllToAll, dist.OpBarrier:
		return depFirst
	case dist.OpReduce: // contributions carry their count in Aux; a chain's running sum carries 0
		if fr.Aux >= 1 {
			return depFirst
		}
		return depUp
	case dist.OpAllReduce:
		switch fr.Aux {
		case 0: // the flat algorithm's reduced chunks: they wait for the contributions only
			return depOther
		case 2:
			return depDown
		}
	}
	return depOther
}

func (f *Fabric) call(r int, comm uint32, seq uint64) *callClock {
	cc := f.calls[r][comm]
	if cc == nil || cc.seq != seq {
		cc = &callClock{seq: seq, start: f.clock[r], byPart: map[uint32]time.Duration{}, flat: map[int]uint32{}}
		f.calls[r][comm] = cc
	}
	return cc
}

// issue is when src may start sending fr to dst. f.mu is held.
func (f *Fabric) issue(src, dst int, fr *dist.Frame) time.Duration {
	if !f.virtual {
		return time.Since(f.epoch)
	}
	if fr.Op == dist.OpSend || fr.Op == dist.OpAbort {
		return f.clock[src]
	}
	cc := f.call(src, fr.Comm, fr.Seq)
	t := cc.start
	switch {
	case depOf(fr) == depFirst:
	case fr.Op == dist.OpAllReduce && fr.Aux == 0: // flat: after its segment's contributions
		i := cc.flat[dst]
		cc.flat[dst] = i + 1
		t = max(t, cc.byPart[i])
	case depOf(fr) == depUp: // after the node's contributions and the running sum below
		t = max(t, cc.arr[depFirst], cc.arr[depUp])
	case depOf(fr) == depDown:
		t = max(t, cc.arr[depFirst], cc.arr[depUp], cc.arr[depDown])
	default:
		for _, a := range cc.arr {
			t = max(t, a)
		}
	}
	return t
}

type linkKey struct {
	comm     uint32
	from, to int
}

// Stats is what went over the links.
type Stats struct {
	Frames    [classLimit]int64
	Bytes     [classLimit]int64
	Lost      int64 // frames lost once and resent
	Corrupted int64 // frames delivered with a flipped bit
	Held      int64 // frames that waited for a flapping link to come back
}

// New returns the fabric of topo (sized to its world: Topology.For); virtual selects the
// discrete-event clock, seed the jitter, loss and corruption draws.
func New(topo *Topology, virtual bool, seed uint64) *Fabric {
	n := topo.World
	f := &Fabric{topo: topo, virtual: virtual, epoch: time.Now(), clock: make([]time.Duration, n),
		port: make([][classLimit]time.Duration, n), busy: make([][classLimit][]span, n), rng: make([]*rand.Rand, n),
		stamps: map[linkKey][]time.Duration{}, links: map[linkKey]*sync.Mutex{}, arrived: map[linkKey]time.Duration{}, sent: make([]int, n), calls: make([]map[uint32]*callClock, n)}
	for r := range f.rng {
		f.calls[r] = map[uint32]*callClock{}
		f.rng[r] = rand.New(rand.NewPCG(seed, 0xfab+uint64(r)))
	}
	return f
}

// Topology is the fabric's topology; Virtual whether its time is virtual.
func (f *Fabric) Topology() *Topology { return f.topo }
func (f *Fabric) Virtual() bool       { return f.virtual }

// Stats returns a copy of the counters.
func (f *Fabric) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Now is rank r's time on the fabric: its virtual clock, or the wall time since the fabric
// was made.
func (f *Fabric) Now(r int) time.Duration {
	if !f.virtual {
		return time.Since(f.epoch)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clock[r]
}

// Wrap returns t (one rank's endpoint of the world the fabric models) with every frame it
// sends paying its link's cost. The result also has Now() (this rank's fabric time), which the
// collectives checker times with.
func (f *Fabric) Wrap(t dist.Transport) dist.Transport { return &endpoint{Transport: t, f: f} }

type endpoint struct {
	dist.Transport
	f *Fabric
}

// Now is this rank's fabric time.
func (e *endpoint) Now() time.Duration { return e.f.Now(e.Rank()) }

// Arrived is when the last frame this rank took from rank from on comm arrived, on the
// fabric's clock (dist.Timed).
func (e *endpoint) Arrived(comm uint32, from int) time.Duration {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	return e.f.arrived[linkKey{comm, from, e.Rank()}]
}

// Unwrap is the transport below the fabric (dist.Wrapper).
func (e *endpoint) Unwrap() dist.Transport { return e.Transport }

// Fabric is the fabric this endpoint belongs to.
func (e *endpoint) Fabric() *Fabric { return e.f }

func (e *endpoint) Recycle(fr *dist.Frame) {
	if r, ok := e.Transport.(dist.Recycler); ok {
		r.Recycle(fr)
	}
}

func (e *endpoint) link(k linkKey) *sync.Mutex {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	m := e.f.links[k]
	if m == nil {
		m = &sync.Mutex{}
		e.f.links[k] = m
	}
	return m
}

func (e *endpoint) Send(ctx context.Context, to int, fr *dist.Frame) error {
	src := e.Rank()
	if to < 0 || to >= e.f.topo.World || to == src {
		return e.Transport.Send(ctx, to, fr) // the transport's own error (or loopback)
	}
	k := linkKey{fr.Comm, src, to}
	lm := e.link(k)
	lm.Lock()
	defer lm.Unlock()
	arrive, out := e.f.schedule(src, to, fr)
	if !e.f.virtual {
		if d := time.Until(e.f.epoch.Add(arrive)); d > 0 {
			tm := time.NewTimer(d)
			select {
			case <-tm.C:
			case <-ctx.Done():
				tm.Stop()
				return ctx.Err()
			}
		}
		return e.Transport.Send(ctx, to, out)
	}
	e.f.mu.Lock()
	e.f.stamps[k] = append(e.f.stamps[k], arrive)
	e.f.mu.Unlock()
	if err := e.Transport.Send(ctx, to, out); err != nil {
		e.f.mu.Lock()
		if q := e.f.stamps[k]; len(q) > 0 {
			e.f.stamps[k] = q[:len(q)-1]
		}
		e.f.mu.Unlock()
		return err
	}
	return nil
}

func (e *endpoint) Recv(ctx context.Context, comm uint32, from int) (*dist.Frame, error) {
	fr, err := e.Transport.Recv(ctx, comm, from)
	if err != nil {
		return fr, err
	}
	me := e.Rank()
	k := linkKey{comm, from, me}
	if !e.f.virtual {
		e.f.mu.Lock()
		e.f.arrived[k] = time.Since(e.f.epoch)
		e.f.mu.Unlock()
		return fr, nil
	}
	e.f.mu.Lock()
	if q := e.f.stamps[k]; len(q) > 0 {
		if fr.Op != dist.OpSend && fr.Op != dist.OpAbort {
			cc := e.f.call(me, comm, fr.Seq)
			d := depOf(fr)
			cc.arr[d] = max(cc.arr[d], q[0])
			if d == depFirst {
				cc.byPart[fr.Part] = max(cc.byPart[fr.Part], q[0])
			}
		}
		e.f.clock[me] = max(e.f.clock[me], q[0])
		e.f.arrived[k] = q[0]
		e.f.stamps[k] = q[1:]
	}
	e.f.mu.Unlock()
	return fr, nil
}

// schedule books fr on src's port and returns its arrival time and the frame to deliver (a
// copy with one bit flipped when the link or a faulty NIC corrupts it).
func (f *Fabric) schedule(src, dst int, fr *dist.Frame) (time.Duration, *dist.Frame) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cls := f.topo.Class(src, dst)
	l := f.topo.Links[cls]
	scale, corruptNIC := f.effects(src, dst)
	ser := time.Duration(float64(len(fr.Payload)) / l.Bandwidth * float64(time.Second) * scale)
	lat := time.Duration(float64(l.Latency) * scale)
	rng := f.rng[src]
	if l.Jitter > 0 {
		lat += time.Duration(rng.Int64N(int64(l.Jitter) + 1))
	}
	start := f.issue(src, dst, fr)
	if up := f.upAt(src, dst, start); up > start {
		start = up
		f.stats.Held++
	}
	if f.virtual {
		start = f.book(src, cls, start, ser)
	} else {
		start = max(start, f.port[src][cls])
		f.port[src][cls] = start + ser
	}
	arrive := start + ser + lat
	if l.Loss > 0 && rng.Float64() < l.Loss {
		arrive += 4*l.Latency + ser // a resend after a timeout of a few round trips
		f.stats.Lost++
	}
	f.stats.Frames[cls]++
	f.stats.Bytes[cls] += int64(len(fr.Payload))
	out := fr
	if len(fr.Payload) > 0 {
		f.sent[src]++
		flip := corruptNIC > 0 && f.sent[src]%corruptNIC == 0
		if !flip && l.Corrupt > 0 && rng.Float64() < l.Corrupt {
			flip = true
		}
		if flip {
			c := *fr
			c.Payload = append([]byte(nil), fr.Payload...)
			bit := rng.IntN(8 * len(c.Payload))
			c.Payload[bit/8] ^= 1 << (bit % 8)
			out = &c
			f.stats.Corrupted++
		}
	}
	return arrive, out
}

// span is a port's busy time [from, to).
type span struct{ from, to time.Duration }

// book reserves ser of src's port for cls at the earliest free time >= t and returns it. In
// virtual time the ranks' goroutines book in whatever order they run, not in the order of
// their issue times, so a frame issued earlier but booked later takes the first gap that
// fits it (earliest fit) instead of queueing behind frames issued after it. f.mu is held.
func (f *Fabric) book(src int, cls Class, t, ser time.Duration) time.Duration {
	spans := f.busy[src][cls]
	i := 0
	for ; i < len(spans); i++ {
		if spans[i].to <= t {
			continue
		}
		if spans[i].from >= t+ser {
			break
		}
		t = max(t, spans[i].to)
	}
	if ser > 0 {
		spans = append(spans, span{})
		copy(spans[i+1:], spans[i:])
		spans[i] = span{t, t + ser}
	}
	// Spans that end before every call this rank has in flight began can take no more frames.
	if len(spans) > 64 {
		horizon := f.clock[src]
		for _, cc := range f.calls[src] {
			horizon = min(horizon, cc.start)
		}
		k := 0
		for k < len(spans) && spans[k].to < horizon {
			k++
		}
		spans = append(spans[:0], spans[k:]...)
	}
	f.busy[src][cls] = spans
	return t
}
