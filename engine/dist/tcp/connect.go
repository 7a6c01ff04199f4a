package tcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/dist/internal/framequeue"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func newReader(c net.Conn) *bufio.Reader { return bufio.NewReaderSize(c, readBuffer) }

// Connect builds this rank's endpoint of the full mesh. Every rank of the world must call it
// with the same JobID and World on the same store; it returns when every pair is connected,
// or fails with E_COMM_INIT naming the ranks it could not reach (or that refused it, and why)
// within cfg.Timeout or ctx's deadline.
func Connect(ctx context.Context, cfg Config) (*Transport, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	t := &Transport{rank: cfg.Rank, world: cfg.World, job: cfg.JobID, qBytes: cfg.QueueBytes, qFrames: cfg.QueueFrames,
		closing: make(chan struct{}), peers: make([]*peer, cfg.World)}
	for r := range t.peers {
		t.peers[r] = &peer{t: t, rank: r, wlock: make(chan struct{}, 1), queues: map[uint32]*framequeue.Queue{}, dead: make(chan struct{})}
	}
	if cfg.World == 1 {
		return t, nil
	}
	c := connector{t: t, cfg: cfg, start: time.Now()}
	if err := c.run(ctx); err != nil {
		for _, p := range t.peers {
			if p.conn != nil {
				p.conn.Close()
			}
		}
		return nil, err
	}
	for _, p := range t.peers {
		if p.conn != nil {
			t.wg.Add(1)
			go t.read(p)
		}
	}
	// Nobody returns before the whole mesh is up, so a rank that connected to some peers and
	// not others fails everywhere at setup, not in the first collective.
	if err := rdzv.Barrier(ctx, cfg.Store, c.prefix+"/connected", t.rank, t.world, t.addr); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

type connector struct {
	t      *Transport
	cfg    Config
	prefix string
	me     hello
	start  time.Time

	mu       sync.Mutex
	refusals []string // why peers were refused or refused us, for the timeout message
}

func (c *connector) refused(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.refusals) < 8 {
		c.refusals = append(c.refusals, fmt.Sprintf(format, args...))
	}
}

func (c *connector) fail(format string, args ...any) error {
	return errs.New(errs.CommInit, "tcp rank %d of job %s: %s", c.t.rank, c.t.job, fmt.Sprintf(format, args...))
}

// arrival is one established connection, or the error that ends setup.
type arrival struct {
	rank int
	conn *net.TCPConn
	err  error
}

func (c *connector) run(ctx context.Context) error {
	t, st := c.t, c.cfg.Store
	// The generation tells this Connect apart from earlier ones of the same rank in the job.
	gen, err := st.Add(ctx, rankKey("tessera/"+t.job+"/tcp", "generation", t.rank), 1)
	if err != nil {
		return errs.Wrap(errs.CommInit, err, "tcp rank %d of job %s", t.rank, t.job)
	}
	c.prefix = "tessera/" + t.job + "/tcp/" + strconv.FormatInt(gen, 10)
	c.me = hello{job: t.job, world: t.world, from: t.rank, generation: uint64(gen)}

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(c.cfg.ListenHost, "0"))
	if err != nil {
		return c.fail("cannot listen on %s: %v", c.cfg.ListenHost, err)
	}
	t.addr = ln.Addr().String()
	if err := st.Set(ctx, rankKey(c.prefix, "addr", t.rank), []byte(t.addr)); err != nil {
		ln.Close()
		return errs.Wrap(errs.CommInit, err, "tcp rank %d of job %s: publishing %s", t.rank, t.job, t.addr)
	}

	arrivals := make(chan arrival, t.world)
	var wg sync.WaitGroup
	actx, acancel := context.WithCancel(ctx)
	defer func() {
		acancel()
		ln.Close()
		wg.Wait()
		// Connections that arrived after setup failed were never handed to a peer.
		for len(arrivals) > 0 {
			if a := <-arrivals; a.conn != nil && t.peers[a.rank].conn != a.conn {
				a.conn.Close()
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.accept(actx, ln, arrivals, &wg)
	}()
	for r := 0; r < t.rank; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := c.dial(actx, r)
			select {
			case arrivals <- arrival{rank: r, conn: conn, err: err}:
			case <-actx.Done():
				if conn != nil {
					conn.Close()
				}
			}
		}()
	}

	need := t.world - 1
	for need > 0 {
		select {
		case a := <-arrivals:
			if a.err != nil {
				if ctx.Err() != nil || errors.Is(a.err, context.DeadlineExceeded) {
					return c.timeout(ctx)
				}
				return a.err
			}
			t.peers[a.rank].conn = a.conn
			t.peers[a.rank].addr = a.conn.RemoteAddr().String()
			need--
		case <-ctx.Done():
			return c.timeout(ctx)
		}
	}
	return nil
}

// timeout names the peers that never connected.
func (c *connector) timeout(ctx context.Context) error {
	t := c.t
	var missing, unpublished []int
	for r, p := range t.peers {
		if r != t.rank && p.conn == nil {
			missing = append(missing, r)
		}
	}
	// Which of them never even published an address (never reached Connect)?
	gctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	keys := make([]string, len(missing))
	for i, r := range missing {
		keys[i] = rankKey(c.prefix, "addr", r)
	}
	if present, err := c.cfg.Store.Check(gctx, keys...); err == nil {
		for i, ok := range present {
			if !ok {
				unpublished = append(unpublished, missing[i])
			}
		}
	}
	msg := fmt.Sprintf("no connection with rank(s) %s of %d within %s", rdzv.FormatRanks(missing), t.world, time.Since(c.start).Round(time.Millisecond))
	if len(unpublished) > 0 {
		msg += fmt.Sprintf("; rank(s) %s never published an address (never reached Connect)", rdzv.FormatRanks(unpublished))
	}
	c.mu.Lock()
	if len(c.refusals) > 0 {
		msg += "; refused: " + c.refusals[len(c.refusals)-1]
	}
	c.mu.Unlock()
	return errs.Wrap(errs.CommInit, context.DeadlineExceeded, "tcp rank %d of job %s: %s", t.rank, t.job, msg)
}

// dial connects to lower rank r once its address is published.
func (c *connector) dial(ctx context.Context, r int) (*net.TCPConn, error) {
	addr, err := c.cfg.Store.Get(ctx, rankKey(c.prefix, "addr", r))
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err // the collector reports the timeout
		}
		return nil, errs.Wrap(errs.CommInit, err, "tcp rank %d of job %s: address of rank %d", c.t.rank, c.t.job, r)
	}
	var d net.Dialer
	var conn net.Conn
	backoff := 10 * time.Millisecond
	for {
		conn, err = d.DialContext(ctx, "tcp", string(addr))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The listener exists before its address is published, so this is transient
		// (a full accept backlog) or the peer just died; retry until the deadline.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
	tc := conn.(*net.TCPConn)
	tune(tc)
	dl := time.Now().Add(handshakeTimeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(dl) {
		dl = cd
	}
	tc.SetDeadline(dl)
	release := watch(ctx, tc.SetDeadline)
	defer release()
	want := c.me
	want.to = r
	if _, err := tc.Write(want.marshal()); err != nil {
		tc.Close()
		return nil, c.fail("handshake with rank %d at %s: %v", r, addr, err)
	}
	theirs, reason, err := readAnswer(tc)
	if err != nil {
		tc.Close()
		return nil, c.fail("handshake with rank %d at %s: %v", r, addr, err)
	}
	if reason != "" {
		tc.Close()
		return nil, c.fail("rank %d at %s refused the connection: %s", r, addr, reason)
	}
	expect := hello{job: c.me.job, world: c.me.world, generation: c.me.generation, from: r, to: c.t.rank}
	if why := theirs.mismatch(expect); why != "" {
		tc.Close()
		return nil, c.fail("the peer at %s (published as rank %d) is not the one expected: %s", addr, r, why)
	}
	tc.SetDeadline(time.Time{})
	return tc, nil
}

// accept takes connections from higher ranks until setup ends.
func (c *connector) accept(ctx context.Context, ln net.Listener, arrivals chan<- arrival, wg *sync.WaitGroup) {
	var mu sync.Mutex
	taken := map[int]bool{}
	for {
		conn, err := ln.Accept()
		if err != nil {
			return // the listener closed: setup is over
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tc := conn.(*net.TCPConn)
			tune(tc)
			tc.SetDeadline(time.Now().Add(handshakeTimeout))
			release := watch(ctx, tc.SetDeadline)
			theirs, err := readHello(tc)
			if err != nil {
				var stray errStray
				if errors.As(err, &stray) {
					c.refused("a connection from %s: %s", tc.RemoteAddr(), stray.why)
				}
				release()
				tc.Close()
				return
			}
			expect := c.me
			expect.to, expect.from = c.t.rank, -1
			why := theirs.mismatch(expect)
			if why == "" && (theirs.from <= c.t.rank || theirs.from >= c.t.world) {
				why = fmt.Sprintf("rank %d does not dial rank %d (higher ranks dial lower ones, world %d)", theirs.from, c.t.rank, c.t.world)
			}
			if why == "" {
				mu.Lock()
				if taken[theirs.from] {
					why = fmt.Sprintf("rank %d is already connected", theirs.from)
				}
				taken[theirs.from] = true
				mu.Unlock()
			}
			if why != "" {
				c.refused("a peer at %s claiming rank %d: %s", tc.RemoteAddr(), theirs.from, why)
				writeAnswer(tc, why, hello{})
				release()
				tc.Close()
				return
			}
			me := c.me
			me.to = theirs.from
			err = writeAnswer(tc, "", me)
			release()
			if err != nil || ctx.Err() != nil {
				tc.Close()
				return
			}
			tc.SetDeadline(time.Time{})
			select {
			case arrivals <- arrival{rank: theirs.from, conn: tc}:
			case <-ctx.Done():
				tc.Close()
			}
		}()
	}
}
