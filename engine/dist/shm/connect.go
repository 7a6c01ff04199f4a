//go:build unix

package shm

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/dist/internal/framequeue"
	"hash/fnv"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// filePrefix starts every ring file's name; the creator's pid follows, so a sweep can tell
// the files of a dead process (see sweepStale).
const filePrefix = "tessera-shm-"

// staleAge: a ring file this old whose creator is gone is a crash's leftover. Live files exist
// only during Connect, which the store bounds; the margin covers pid reuse across namespaces.
const staleAge = 10 * time.Minute

// Connect builds this rank's endpoint of the mesh of rings. Every rank of the world must call
// it with the same JobID and World on the same store; it returns when every rank has mapped
// every ring, or fails with E_COMM_INIT naming the ranks it could not meet.
func Connect(ctx context.Context, cfg Config) (*Transport, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	t := &Transport{rank: cfg.Rank, world: cfg.World, job: cfg.JobID, ringBytes: cfg.RingBytes,
		qBytes: cfg.QueueBytes, qFrames: cfg.QueueFrames, closing: make(chan struct{}), peers: make([]*peer, cfg.World)}
	for r := range t.peers {
		t.peers[r] = &peer{t: t, rank: r, wlock: make(chan struct{}, 1), queues: map[uint32]*framequeue.Queue{}, dead: make(chan struct{})}
	}
	if cfg.World == 1 {
		return t, nil
	}
	c := connector{t: t, cfg: cfg, start: time.Now()}
	if err := c.run(ctx); err != nil {
		c.undo()
		return nil, err
	}
	for _, p := range t.peers {
		if p.in != nil {
			t.wg.Add(1)
			go t.read(p)
		}
	}
	return t, nil
}

type connector struct {
	t      *Transport
	cfg    Config
	prefix string
	gen    uint64
	job    uint64
	start  time.Time
}

func (c *connector) fail(format string, args ...any) error {
	return errs.New(errs.CommInit, "shm rank %d of job %s: %s", c.t.rank, c.t.job, fmt.Sprintf(format, args...))
}

func (c *connector) wrap(err error, format string, args ...any) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return errs.Wrap(errs.CommInit, err, "shm rank %d of job %s: %s within %s", c.t.rank, c.t.job, fmt.Sprintf(format, args...), time.Since(c.start).Round(time.Millisecond))
	}
	return errs.Wrap(errs.CommInit, err, "shm rank %d of job %s: %s", c.t.rank, c.t.job, fmt.Sprintf(format, args...))
}

// undo releases what a failed setup made: mappings, and files nobody unlinked yet.
func (c *connector) undo() {
	for _, p := range c.t.peers {
		if p.out != nil {
			atomic.StoreUint32(p.out.prodClosed, 1)
			os.Remove(p.out.path)
			p.out.unmap()
			p.out = nil
		}
		if p.in != nil {
			atomic.StoreUint32(p.in.consClosed, 1)
			p.in.unmap()
			p.in = nil
		}
	}
}

func (c *connector) run(ctx context.Context) error {
	t, st := c.t, c.cfg.Store
	gen, err := st.Add(ctx, rankKey("tessera/"+t.job+"/shm", "generation", t.rank), 1)
	if err != nil {
		return c.wrap(err, "generation")
	}
	c.gen = uint64(gen)
	c.prefix = "tessera/" + t.job + "/shm/" + strconv.FormatInt(gen, 10)
	h := fnv.New64a()
	h.Write([]byte(t.job))
	c.job = h.Sum64()

	// Rings only work between processes that see the same memory: one boot of one host.
	host := hostID()
	if err := st.Set(ctx, rankKey(c.prefix, "host", t.rank), []byte(host)); err != nil {
		return c.wrap(err, "publishing the host id")
	}
	if t.rank != 0 {
		h0, err := st.Get(ctx, rankKey(c.prefix, "host", 0))
		if err != nil {
			return c.wrap(err, "no host id from rank 0")
		}
		if string(h0) != host {
			return c.fail("rank 0 runs on another host (%s, this rank on %s): the shm transport needs every rank on one machine (use tcp)", h0, host)
		}
	}

	sweepStale(c.cfg.Dir)
	for j, p := range t.peers {
		if j == t.rank {
			continue
		}
		r, err := c.create(j)
		if err != nil {
			return err
		}
		p.out = r
		// The size goes with the path, so ranks configured differently both say so, even when
		// the other's file is already gone.
		if err := st.Set(ctx, c.ringKey(t.rank, j), []byte(strconv.Itoa(t.ringBytes)+" "+r.path)); err != nil {
			return c.wrap(err, "publishing the ring to rank %d", j)
		}
	}
	for j, p := range t.peers {
		if j == t.rank {
			continue
		}
		v, err := st.Get(ctx, c.ringKey(j, t.rank))
		if err != nil {
			return c.wrap(err, "rank %d never published its ring to this rank", j)
		}
		size, path, _ := strings.Cut(string(v), " ")
		if size != strconv.Itoa(t.ringBytes) {
			return c.fail("rank %d's rings have %s data bytes, this rank's %d (ranks configured with different ring sizes)", j, size, t.ringBytes)
		}
		if p.in, err = c.open(j, path); err != nil {
			return err
		}
	}
	// Every ring is mapped on both ends and unlinked by its consumer once this returns.
	if err := rdzv.Barrier(ctx, st, c.prefix+"/mapped", t.rank, t.world, strconv.Itoa(os.Getpid())); err != nil {
		return err
	}
	for _, p := range t.peers {
		if p.out != nil {
			os.Remove(p.out.path) // normally gone already: the consumer unlinked it
			p.out.noPid = !alive(atomic.LoadUint32(p.out.consPid))
		}
	}
	return nil
}

func (c *connector) ringKey(from, to int) string {
	return c.prefix + "/ring/" + strconv.Itoa(from) + "/" + strconv.Itoa(to)
}

// create makes and maps the ring from this rank to rank `to`.
func (c *connector) create(to int) (*ring, error) {
	var rnd [6]byte
	rand.Read(rnd[:])
	name := fmt.Sprintf("%s%d-%s-%dto%d", filePrefix, os.Getpid(), hex.EncodeToString(rnd[:]), c.t.rank, to)
	path := filepath.Join(c.cfg.Dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, c.fail("cannot create the ring to rank %d: %v", to, err)
	}
	defer f.Close()
	size := ctlBytes + c.t.ringBytes
	if err := f.Truncate(int64(size)); err != nil {
		os.Remove(path)
		return nil, c.fail("cannot size the ring to rank %d (%d bytes in %s): %v", to, size, c.cfg.Dir, err)
	}
	r, err := mapFile(f, size)
	if err != nil {
		os.Remove(path)
		return nil, c.fail("cannot map the ring to rank %d: %v", to, err)
	}
	le := binary.LittleEndian
	le.PutUint64(r.mem[offCap:], uint64(c.t.ringBytes))
	le.PutUint32(r.mem[offWorld:], uint32(c.t.world))
	le.PutUint32(r.mem[offFrom:], uint32(c.t.rank))
	le.PutUint32(r.mem[offTo:], uint32(to))
	le.PutUint64(r.mem[offGen:], c.gen)
	le.PutUint64(r.mem[offJob:], c.job)
	atomic.StoreUint32(r.prodPid, uint32(os.Getpid()))
	// The magic goes last: a consumer that finds it finds the rest.
	atomic.StoreUint64(u64At(r.mem, offMagic), ringMagic)
	return r, nil
}

// open maps the ring from rank `from` to this rank, checks that it is that ring, and unlinks
// its file: from now on only the two mappings keep it.
func (c *connector) open(from int, path string) (*ring, error) {
	if filepath.Dir(path) != filepath.Clean(c.cfg.Dir) || !strings.HasPrefix(filepath.Base(path), filePrefix) {
		return nil, c.fail("rank %d published %q, not a ring file in %s", from, path, c.cfg.Dir)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, c.fail("cannot open the ring from rank %d: %v", from, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, c.fail("cannot stat the ring from rank %d: %v", from, err)
	}
	size := fi.Size()
	if size != int64(ctlBytes+c.t.ringBytes) {
		return nil, c.fail("the ring from rank %d has %d bytes, this rank's rings %d (ranks configured with different ring sizes)", from, size, ctlBytes+c.t.ringBytes)
	}
	r, err := mapFile(f, int(size))
	if err != nil {
		return nil, c.fail("cannot map the ring from rank %d: %v", from, err)
	}
	os.Remove(path)
	le := binary.LittleEndian
	why := ""
	switch {
	case atomic.LoadUint64(u64At(r.mem, offMagic)) != ringMagic:
		why = "no ring magic"
	case le.Uint64(r.mem[offJob:]) != c.job:
		why = "it belongs to another job"
	case le.Uint32(r.mem[offWorld:]) != uint32(c.t.world):
		why = fmt.Sprintf("its world size is %d, this rank's %d", le.Uint32(r.mem[offWorld:]), c.t.world)
	case le.Uint64(r.mem[offGen:]) != c.gen:
		why = fmt.Sprintf("it is of transport generation %d, this rank in %d (one rank connected more often than another)", le.Uint64(r.mem[offGen:]), c.gen)
	case le.Uint32(r.mem[offFrom:]) != uint32(from) || le.Uint32(r.mem[offTo:]) != uint32(c.t.rank):
		why = fmt.Sprintf("it is the ring from rank %d to rank %d", le.Uint32(r.mem[offFrom:]), le.Uint32(r.mem[offTo:]))
	}
	if why != "" {
		r.unmap()
		return nil, c.fail("the ring rank %d published is not the one expected: %s", from, why)
	}
	atomic.StoreUint32(r.consPid, uint32(os.Getpid()))
	r.noPid = !alive(atomic.LoadUint32(r.prodPid))
	return r, nil
}

// sweepStale removes ring files of processes that died during a Connect (after creating a
// ring, before its consumer unlinked it): the one window where a crash leaves a file.
func sweepStale(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, filePrefix) {
			continue
		}
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(name, filePrefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || alive(uint32(pid)) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleAge {
			os.Remove(filepath.Join(dir, name))
		}
	}
}

// hostID tells machines (and boots of one machine) apart.
func hostID() string {
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		return strings.TrimSpace(string(b))
	}
	h, _ := os.Hostname()
	return h
}

// DefaultDir is where ring files are made: /dev/shm (memory) when it exists, else the
// temporary directory.
func DefaultDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// defaultRingBytes shares ringBudget among the world's n(n-1) rings.
func defaultRingBytes(world int) int {
	b := ringBudget / max(world*(world-1), 1)
	return min(max(b, MinRingBytes), MaxRingBytes)
}

func rankKey(prefix, what string, rank int) string {
	return prefix + "/" + what + "/" + strconv.Itoa(rank)
}

func (c *Config) check() error {
	switch {
	case c.World < 1 || c.World > rdzv.MaxWorld:
		return errs.New(errs.Input, "shm: world size %d (want 1..%d)", c.World, rdzv.MaxWorld)
	case c.Rank < 0 || c.Rank >= c.World:
		return errs.New(errs.Input, "shm: rank %d outside world %d", c.Rank, c.World)
	case c.Store == nil && c.World > 1:
		return errs.New(errs.Input, "shm rank %d: no rendezvous store", c.Rank)
	case c.RingBytes < 0 || (c.RingBytes > 0 && c.RingBytes < 4096):
		return errs.New(errs.Input, "shm rank %d: ring of %d bytes (want at least 4096)", c.Rank, c.RingBytes)
	}
	if c.JobID == "" {
		c.JobID = "default"
	}
	if c.Timeout <= 0 {
		c.Timeout = rdzv.DefaultTimeout
	}
	if c.Dir == "" {
		c.Dir = DefaultDir()
	}
	if c.RingBytes == 0 {
		c.RingBytes = defaultRingBytes(c.World)
	}
	c.RingBytes = 1 << (bits.Len(uint(c.RingBytes)) - 1)
	if c.QueueBytes <= 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.QueueFrames <= 0 {
		c.QueueFrames = DefaultQueueFrames
	}
	return nil
}
