package collectives

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Config is one run: the cases, run in order on every rank, and how.
type Config struct {
	Cases []Case
	Mode  dist.Mode
	// Iters timed calls per case and placement after Warmup untimed ones (nccl-tests' -n and
	// -w); the time is the median of the calls' slowest-rank times (timeIt). Iters 0 checks
	// without timing (time and bandwidths are 0).
	Iters, Warmup int
	Seed          uint64
	// Timeout bounds each collective (dist.Options.Timeout); 0 is dist.DefaultTimeout.
	Timeout time.Duration
	// Delay, when > 0, holds every frame a rank sends for a random time up to Delay (seeded
	// per rank), so frames arrive in another order than they were sent.
	Delay time.Duration
	// Split is the number of contributions of the exact-mode split check (DefaultSplit when
	// 0, none when negative).
	Split int
	// Progress, when set, is called on rank 0 after each case.
	Progress func(done, total int)
	// Mismatch, when set, makes one rank call every case with another count, dtype or op:
	// the desync check (its ranks must fail with E_DESYNC, none may hang).
	Mismatch *Mismatch
	// Wrap, when set, wraps every rank's transport (outermost, after Delay): a modeled
	// fabric (engine/dist/fabric), whose Now() then times the calls.
	Wrap func(dist.Transport) dist.Transport
	// HierNode > 0 runs all_reduce on the hierarchical route over nodes of that many ranks
	// (dist.Comm.AllReduceHier; it takes the flat route where that one does not apply).
	HierNode int
	// commID is the communicator id NewComm gives (several runs over one transport).
	commID uint32
}

// Mismatch describes a deliberately mismatched call.
type Mismatch struct {
	Rank int    // world rank that makes the wrong call
	What string // "count", "dtype" or "op"
}

// ParseMismatch reads RANK:WHAT ("1:count").
func ParseMismatch(s string) (*Mismatch, error) {
	r, w, ok := strings.Cut(s, ":")
	m := &Mismatch{What: w}
	var err error
	if ok {
		m.Rank, err = atoi(r)
	}
	if !ok || err != nil || m.Rank < 0 || (w != "count" && w != "dtype" && w != "op") {
		return nil, errs.New(errs.Input, "mismatch %q: want RANK:count, RANK:dtype or RANK:op", s)
	}
	return m, nil
}

// DefaultSplit is the number of contributions of the exact-mode split check: the same 24
// buffers summed by worlds of 1, 2, 3, 4 and 8 ranks (24 splits evenly over each) must give
// identical bits.
const DefaultSplit = 24

// SplitMaxCount bounds the rows that get the split check: checking the answer regenerates
// every contribution, Split times a row's inputs.
const SplitMaxCount = 1 << 20

func (cfg *Config) split(world int) int {
	switch {
	case cfg.Split < 0:
		return 0
	case cfg.Split == 0:
		return SplitFor(world)
	}
	return cfg.Split
}

// SplitFor is the default number of split contributions for worlds up to maxWorld:
// DefaultSplit, or the smallest multiple of it that gives every rank at least one
// contribution (a rank with none has nothing to reduce). A command running several worlds
// uses its largest, so every world sums the same contributions.
func SplitFor(maxWorld int) int {
	return max(1, (maxWorld+DefaultSplit-1)/DefaultSplit) * DefaultSplit
}

// NewComm wraps t as the run's communicator: cfg's mode and timeout, and the injected
// delays when cfg.Delay is set.
func NewComm(t dist.Transport, cfg Config) *dist.Comm {
	if cfg.Delay > 0 {
		t = withDelay(t, cfg.Delay, cfg.Seed)
	}
	if cfg.Wrap != nil {
		t = cfg.Wrap(t)
	}
	return dist.NewComm(t, dist.Options{Mode: cfg.Mode, Timeout: cfg.Timeout, ID: cfg.commID})
}

// withDelay holds every frame t sends for a random time in [0, max], drawn from a stream
// seeded by (seed, rank): ranks are slowed differently, so arrivals are reordered.
func withDelay(t dist.Transport, maxDelay time.Duration, seed uint64) dist.Transport {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0xde1a7+uint64(t.Rank())))
	return dist.Intercept(t, func(ctx context.Context, to int, f *dist.Frame) []*dist.Frame {
		mu.Lock()
		d := time.Duration(rng.Int64N(int64(maxDelay) + 1))
		mu.Unlock()
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
		}
		return []*dist.Frame{f}
	})
}

// record is what one rank measured of one case; every rank's records are gathered over the
// communicator itself as fixed-size byte strings.
type record struct {
	wrong, wrongIP, wrongSplit int64
	secs, secsIP               float64
	digest, digestIP, split    [32]byte
	hasSplit                   bool
	// copySecs: device transports, rank 0: the median time of a device-to-device copy of the
	// case's bytes on this rank's GPU, measured in the same run (0: not measured).
	copySecs float64
}

const recSize = 3*8 + 2*8 + 3*32 + 1 + 8

func (r *record) put(b []byte) {
	le := binary.LittleEndian
	le.PutUint64(b[0:], uint64(r.wrong))
	le.PutUint64(b[8:], uint64(r.wrongIP))
	le.PutUint64(b[16:], uint64(r.wrongSplit))
	le.PutUint64(b[24:], math.Float64bits(r.secs))
	le.PutUint64(b[32:], math.Float64bits(r.secsIP))
	copy(b[40:], r.digest[:])
	copy(b[72:], r.digestIP[:])
	copy(b[104:], r.split[:])
	b[136] = 0
	if r.hasSplit {
		b[136] = 1
	}
	le.PutUint64(b[137:], math.Float64bits(r.copySecs))
}

func getRecord(b []byte) record {
	le := binary.LittleEndian
	var r record
	r.wrong, r.wrongIP, r.wrongSplit = int64(le.Uint64(b[0:])), int64(le.Uint64(b[8:])), int64(le.Uint64(b[16:]))
	r.secs, r.secsIP = math.Float64frombits(le.Uint64(b[24:])), math.Float64frombits(le.Uint64(b[32:]))
	copy(r.digest[:], b[40:72])
	copy(r.digestIP[:], b[72:104])
	copy(r.split[:], b[104:136])
	r.hasSplit = b[136] == 1
	r.copySecs = math.Float64frombits(le.Uint64(b[137:]))
	return r
}

// RunRank runs every case of cfg on this rank of c, in order (every rank of c must call it
// with the same cfg), then gathers every rank's records over c and returns the rows, the same
// on every rank. An error is the first failing collective's (E_DESYNC, E_TIMEOUT_COMM, ...)
// or a bad case (E_INPUT, E_DTYPE).
func RunRank(ctx context.Context, c *dist.Comm, cfg Config) ([]Row, error) {
	n := c.World()
	for _, cs := range cfg.Cases {
		if err := cs.check(n); err != nil {
			return nil, err
		}
	}
	if cfg.Iters < 0 || cfg.Warmup < 0 {
		return nil, errs.New(errs.Input, "collectives: iterations %d and warm-up %d must not be negative", cfg.Iters, cfg.Warmup)
	}
	recs := make([]byte, len(cfg.Cases)*recSize)
	for i, cs := range cfg.Cases {
		rec, err := runCase(ctx, c, cfg, cs)
		if err != nil {
			return nil, err
		}
		rec.put(recs[i*recSize:])
		if c.Rank() == 0 && cfg.Progress != nil {
			cfg.Progress(i+1, len(cfg.Cases))
		}
	}
	return gatherRows(ctx, c, cfg, c.Transport().Name(), recs)
}

// gatherRows gathers every rank's records (recs: this rank's, one per case) over c and builds
// the rows, the same on every rank.
func gatherRows(ctx context.Context, c *dist.Comm, cfg Config, transport string, recs []byte) ([]Row, error) {
	n := c.World()
	all := make([]byte, n*len(recs))
	if err := c.AllGather(ctx, numerics.I8, recs, all); err != nil {
		return nil, err
	}
	rows := make([]Row, len(cfg.Cases))
	for i, cs := range cfg.Cases {
		per := make([]record, n)
		for q := range n {
			per[q] = getRecord(all[q*len(recs)+i*recSize:])
		}
		rows[i] = buildRow(cs, transport, cfg.Mode, n, per)
	}
	return rows, nil
}

// mismatched is the case as the mismatching rank calls it.
func (m *Mismatch) apply(cs Case, n int) Case {
	switch m.What {
	case "count":
		cs.Count += n
	case "dtype":
		if cs.DType == numerics.F64 {
			cs.DType = numerics.F32
		} else {
			cs.DType = numerics.F64
		}
	case "op":
		if cs.Op == AllReduce {
			cs.Op, cs.Red = AllGather, dist.RedNone
		} else {
			cs.Op, cs.Red, cs.Root = AllReduce, dist.Sum, 0
		}
	}
	return cs
}

func runCase(ctx context.Context, c *dist.Comm, cfg Config, cs Case) (record, error) {
	n, r := c.World(), c.Rank()
	if m := cfg.Mismatch; m != nil && m.Rank == c.Transport().Rank() {
		cs = m.apply(cs, n)
	}
	var rec record
	dt, sz := cs.DType, cs.DType.Size()
	sendN, recvN, _ := cs.Buffers(n)
	g := newGen(cfg.Seed, cs)
	v := newVerifier(cs, n, cfg.Mode, g)
	call := func(send, recv []byte) error {
		switch cs.Op {
		case AllReduce:
			if cfg.HierNode > 0 {
				return c.AllReduceHier(ctx, dt, send, recv, cs.Red, cfg.HierNode)
			}
			return c.AllReduce(ctx, dt, send, recv, cs.Red)
		case AllGather:
			return c.AllGather(ctx, dt, send, recv)
		case ReduceScatter:
			return c.ReduceScatter(ctx, dt, send, recv, cs.Red)
		case Broadcast:
			return c.Broadcast(ctx, dt, send, recv, cs.Root)
		}
		return c.AllToAll(ctx, dt, send, recv)
	}

	// Out of place: check the first call, then time.
	send := make([]byte, sendN*sz)
	g.fill(uint64(r), 0, send)
	recv := make([]byte, recvN*sz)
	poison(recv)
	if err := call(send, recv); err != nil {
		return rec, err
	}
	rec.wrong = v.wrong(r, recv)
	rec.digest = digestOf(dt, recv)
	var err error
	if rec.secs, err = timeIt(ctx, c, cfg, nil, func() error { return call(send, recv) }); err != nil {
		return rec, err
	}

	// In place, as nccl-tests places it: all_gather's input is this rank's slot of the
	// output, reduce_scatter's output this rank's slot of the input.
	var buf, in, out []byte
	switch cs.Op {
	case AllGather:
		buf = recv
		poison(buf)
		in, out = buf[r*sendN*sz:(r+1)*sendN*sz], buf
		copy(in, send)
	case ReduceScatter:
		buf = send
		in, out = buf, buf[r*recvN*sz:(r+1)*recvN*sz]
	default:
		buf = recv
		if cs.Op == Broadcast && r != cs.Root {
			poison(buf)
		} else {
			copy(buf, send)
		}
		in, out = buf, buf
	}
	if err := call(in, out); err != nil {
		return rec, err
	}
	rec.digestIP = digestOf(dt, out)
	if rec.digestIP == rec.digest {
		rec.wrongIP = rec.wrong // the same bits as out of place: the same verdict per element
	} else {
		rec.wrongIP = v.wrong(r, out)
	}
	// Each in-place all_reduce and broadcast starts from the inputs again, restored outside the
	// clock, as differential/gloo's torch.distributed calls (always in place) are restored: so
	// the in-place time is the one --vs gloo compares like with like.
	var restore func()
	if cs.Op == AllReduce || (cs.Op == Broadcast && r == cs.Root) {
		restore = func() { copy(buf, send) }
	}
	if rec.secsIP, err = timeIt(ctx, c, cfg, restore, func() error { return call(in, out) }); err != nil {
		return rec, err
	}
	if err := v.meaningless(); err != nil {
		return rec, err
	}

	// Exact mode: the same global contributions split over this world.
	if k := cfg.split(n); cfg.Mode == dist.Exact && cs.Op == AllReduce && k >= n && cs.Count <= SplitMaxCount {
		parts := splitParts(g, r, n, k, cs.Count)
		res := make([]byte, cs.Count*sz)
		poison(res)
		if err := c.AllReduceMulti(ctx, dt, parts, res, cs.Red); err != nil {
			return rec, err
		}
		rec.hasSplit = true
		rec.wrongSplit = v.wrongSplit(k, res, r*cs.Count/n, (r+1)*cs.Count/n)
		rec.split = digestOf(dt, res)
	}
	return rec, nil
}

// splitParts are rank r's share of the k split contributions on n ranks: round robin
// (contributions r, r+n, r+2n, ...), so the global order of contributions (rank 0's, then
// rank 1's, ...) changes with the world size and only an order-independent sum gives the
// same bits on every world.
func splitParts(g gen, r, n, k, count int) [][]byte {
	var parts [][]byte
	for j := r; j < k; j += n {
		p := make([]byte, count*g.dt.Size())
		g.fill(splitStream(j), 0, p)
		parts = append(parts, p)
	}
	return parts
}

// timeIt runs fn Warmup times, then Iters timed repetitions, each after prep (when set) and a
// barrier, both outside the clock, so every rank starts it together. A repetition's time is its slowest rank's (the
// ranks' times are gathered over c); the result is the median over repetitions (design.md §8),
// the same on every rank, and the method differential/gloo's Bench uses, so --vs gloo
// compares like with like. 0 when Iters is 0.
func timeIt(ctx context.Context, c *dist.Comm, cfg Config, prep func(), fn func() error) (float64, error) {
	if cfg.Iters == 0 {
		return 0, nil
	}
	for range cfg.Warmup {
		if prep != nil {
			prep()
		}
		if err := fn(); err != nil {
			return 0, err
		}
	}
	// A modeled fabric's transport keeps its own (possibly virtual) time.
	clock, timed := c.Transport().(interface{ Now() time.Duration })
	return timeReps(ctx, c, cfg.Iters, prep, func() (float64, error) {
		if timed {
			t0 := clock.Now()
			if err := fn(); err != nil {
				return 0, err
			}
			return (clock.Now() - t0).Seconds(), nil
		}
		t0 := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		return time.Since(t0).Seconds(), nil
	})
}

// timeReps runs measure iters times, each after prep (when set) and a barrier on c, outside
// the clock; measure returns this rank's seconds for one call. A repetition's time is its slowest rank's (the
// ranks' times are gathered over c); the result is the median over repetitions, the same on
// every rank.
func timeReps(ctx context.Context, c *dist.Comm, iters int, prep func(), measure func() (float64, error)) (float64, error) {
	mine := make([]byte, 8*iters)
	for i := range iters {
		if prep != nil {
			prep()
		}
		if err := c.Barrier(ctx); err != nil {
			return 0, err
		}
		s, err := measure()
		if err != nil {
			return 0, err
		}
		binary.LittleEndian.PutUint64(mine[8*i:], math.Float64bits(s))
	}
	n := c.World()
	all := make([]byte, n*len(mine))
	if err := c.AllGather(ctx, numerics.F64, mine, all); err != nil {
		return 0, err
	}
	reps := make([]float64, iters)
	for q := range n {
		for i := range reps {
			reps[i] = math.Max(reps[i], math.Float64frombits(binary.LittleEndian.Uint64(all[q*len(mine)+8*i:])))
		}
	}
	sort.Float64s(reps)
	if k := len(reps); k%2 == 1 {
		return reps[k/2], nil
	}
	return (reps[len(reps)/2-1] + reps[len(reps)/2]) / 2, nil
}

// digestOf is the tensor digest (engine/tensor) of a 1-D buffer.
func digestOf(dt numerics.DType, b []byte) [32]byte {
	t := tensor.Tensor{DType: dt, Shape: []int{len(b) / dt.Size()}, Data: b}
	var d [32]byte
	hex.Decode(d[:], []byte(t.Digest()))
	return d
}

// combine is the digest of a row: SHA-256 over every rank's output digest in rank order.
func combine(ds [][32]byte) string {
	h := sha256.New()
	h.Write([]byte("tessera.collectives.row.v1|"))
	for _, d := range ds {
		h.Write(d[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func atoi(s string) (int, error) {
	v := 0
	if s == "" || len(s) > 9 {
		return 0, errs.New(errs.Input, "%q is not a number", s)
	}
	for _, ch := range s {
		if ch < '0' || ch > '9' {
			return 0, errs.New(errs.Input, "%q is not a number", s)
		}
		v = v*10 + int(ch-'0')
	}
	return v, nil
}
