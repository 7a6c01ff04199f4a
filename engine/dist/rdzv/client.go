package rdzv

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// client is a Store over TCP. Requests run on pooled connections, one request per connection
// at a time, so a long Get does not hold up a Set from another goroutine; a connection whose
// request was cut short (deadline, cancel) is discarded, never reused mid-answer.
type client struct {
	addr string

	mu     sync.Mutex
	idle   []*conn
	closed bool
}

type conn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// Dial connects to the store at addr, retrying until ctx's deadline (DefaultTimeout when ctx
// has none): the server may start after its clients. Failure is E_COMM_INIT naming addr.
func Dial(ctx context.Context, addr string) (Store, error) {
	ctx, cancel := bounded(ctx, 0)
	defer cancel()
	cl := &client{addr: addr}
	start := time.Now()
	backoff := 20 * time.Millisecond
	for {
		c, err := cl.dial(ctx)
		if err == nil {
			cl.put(c)
			return cl, nil
		}
		var coded *errs.Error
		if errors.As(err, &coded) {
			return nil, err // reached something that is not our store: retrying will not help
		}
		select {
		case <-ctx.Done():
			return nil, errs.New(errs.CommInit, "rendezvous store at %s unreachable after %s: %v", addr, time.Since(start).Round(time.Millisecond), unwrapOp(err))
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

func (cl *client) Addr() string { return cl.addr }

func (cl *client) dial(ctx context.Context) (*conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", cl.addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	cn := &conn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}
	if _, err := cn.w.Write(hello()); err != nil || cn.w.Flush() != nil {
		c.Close()
		return nil, fmt.Errorf("greeting: %v", err)
	}
	h := make([]byte, 8)
	if _, err := io.ReadFull(cn.r, h); err != nil {
		c.Close()
		if errors.Is(err, io.EOF) {
			return nil, errs.New(errs.CommInit, "rendezvous store at %s: the peer closed the connection without greeting (not a tessera store?)", cl.addr)
		}
		return nil, err
	}
	if err := checkHello(h); err != nil {
		c.Close()
		return nil, errs.New(errs.CommInit, "rendezvous store at %s: %v", cl.addr, err)
	}
	if !stop() {
		c.Close() // ctx ended as the greeting came: the deadline may be spoiled
		return nil, ctx.Err()
	}
	return cn, nil
}

func (cl *client) get(ctx context.Context) (*conn, error) {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil, errs.New(errs.CommInit, "rendezvous store at %s: client closed", cl.addr)
	}
	if n := len(cl.idle); n > 0 {
		c := cl.idle[n-1]
		cl.idle = cl.idle[:n-1]
		cl.mu.Unlock()
		return c, nil
	}
	cl.mu.Unlock()
	c, err := cl.dial(ctx)
	if err != nil {
		return nil, cl.lost(ctx, err)
	}
	return c, nil
}

func (cl *client) put(c *conn) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.closed || len(cl.idle) >= 8 {
		c.c.Close()
		return
	}
	cl.idle = append(cl.idle, c)
}

// Close drops the pooled connections.
func (cl *client) Close() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.closed = true
	for _, c := range cl.idle {
		c.c.Close()
	}
	cl.idle = nil
	return nil
}

// lost names the failure of a call that could not finish: the caller's deadline or a store
// that went away.
func (cl *client) lost(ctx context.Context, err error) error {
	var coded *errs.Error
	if errors.As(err, &coded) {
		return err
	}
	if ctx.Err() != nil {
		return errs.Wrap(errs.CommInit, ctx.Err(), "rendezvous store at %s", cl.addr)
	}
	return errs.New(errs.CommInit, "rendezvous store at %s: connection lost: %v (did the process serving it exit?)", cl.addr, unwrapOp(err))
}

// do runs one request. Requests that wait tell the server how long (the time left before
// ctx's deadline), so the server answers "timeout" itself and the connection stays usable.
func (cl *client) do(ctx context.Context, q request) (response, error) {
	ctx, cancel := bounded(ctx, 0)
	defer cancel()
	dl, _ := ctx.Deadline()
	left := time.Until(dl)
	if left <= 0 {
		return response{}, cl.lost(ctx, context.DeadlineExceeded)
	}
	q.waitMs = uint32(min(left.Milliseconds(), math.MaxUint32))
	c, err := cl.get(ctx)
	if err != nil {
		return response{}, err
	}
	// The socket deadline trails the server's wait a little so the server's answer wins.
	c.c.SetDeadline(dl.Add(time.Second))
	// Cancelled (not timed out): abandon the request now; the connection is then dropped.
	var mu sync.Mutex
	finished, cut := false, false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cut = true
			c.c.SetDeadline(time.Now())
		}
	})
	err = writeRequest(c.w, q)
	var p response
	if err == nil {
		p, err = readResponse(c.r)
	}
	stop()
	mu.Lock()
	finished = true
	if cut && err == nil {
		err = context.Canceled // the answer came, but the connection's deadline is spoiled
	}
	mu.Unlock()
	if err != nil {
		c.c.Close()
		return response{}, cl.lost(ctx, err)
	}
	c.c.SetDeadline(time.Time{})
	cl.put(c)
	switch p.st {
	case stOK:
		return p, nil
	case stTimeout:
		return p, errs.Wrap(errs.CommInit, context.DeadlineExceeded, "rendezvous store at %s: %s %s", cl.addr, opNames[q.op], keyList(q.args))
	default:
		msg := "malformed request"
		if len(p.args) > 0 {
			msg = string(p.args[0])
		}
		return p, errs.New(errs.Input, "rendezvous store at %s: %s", cl.addr, msg)
	}
}

func keyList(args [][]byte) string {
	if len(args) == 1 {
		return strconv.Quote(string(args[0]))
	}
	if len(args) > 3 {
		return fmt.Sprintf("%q and %d more keys", args[0], len(args)-1)
	}
	return fmt.Sprintf("%q", args)
}

func checkKey(addr, key string) error {
	if len(key) == 0 || len(key) > maxKeyBytes {
		return errs.New(errs.Input, "rendezvous store at %s: key of %d bytes (want 1..%d)", addr, len(key), maxKeyBytes)
	}
	return nil
}

func (cl *client) Set(ctx context.Context, key string, value []byte) error {
	if err := checkKey(cl.addr, key); err != nil {
		return err
	}
	if len(value) > maxArgBytes-maxKeyBytes {
		return errs.New(errs.Input, "rendezvous store at %s: value of %d bytes for key %q is too large", cl.addr, len(value), key)
	}
	_, err := cl.do(ctx, request{op: opSet, args: [][]byte{[]byte(key), value}})
	return err
}

func (cl *client) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(cl.addr, key); err != nil {
		return nil, err
	}
	p, err := cl.do(ctx, request{op: opGet, args: [][]byte{[]byte(key)}})
	if err != nil {
		return nil, err
	}
	if len(p.args) != 1 {
		return nil, errs.New(errs.Desync, "rendezvous store at %s: malformed answer to get %q", cl.addr, key)
	}
	return p.args[0], nil
}

func (cl *client) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := checkKey(cl.addr, key); err != nil {
		return 0, err
	}
	d := make([]byte, 8)
	binary.LittleEndian.PutUint64(d, uint64(delta))
	p, err := cl.do(ctx, request{op: opAdd, args: [][]byte{[]byte(key), d}})
	if err != nil {
		return 0, err
	}
	if len(p.args) != 1 {
		return 0, errs.New(errs.Desync, "rendezvous store at %s: malformed answer to add %q", cl.addr, key)
	}
	n, err := strconv.ParseInt(string(p.args[0]), 10, 64)
	if err != nil {
		return 0, errs.New(errs.Desync, "rendezvous store at %s: malformed counter %q for %q", cl.addr, p.args[0], key)
	}
	return n, nil
}

func (cl *client) Wait(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	args, err := cl.keys(keys)
	if err != nil {
		return err
	}
	_, err = cl.do(ctx, request{op: opWait, args: args})
	return err
}

func (cl *client) Check(ctx context.Context, keys ...string) ([]bool, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	args, err := cl.keys(keys)
	if err != nil {
		return nil, err
	}
	p, err := cl.do(ctx, request{op: opCheck, args: args})
	if err != nil {
		return nil, err
	}
	if len(p.args) != 1 || len(p.args[0]) != len(keys) {
		return nil, errs.New(errs.Desync, "rendezvous store at %s: malformed answer to check", cl.addr)
	}
	out := make([]bool, len(keys))
	for i, b := range p.args[0] {
		out[i] = b == 1
	}
	return out, nil
}

func (cl *client) Delete(ctx context.Context, key string) error {
	if err := checkKey(cl.addr, key); err != nil {
		return err
	}
	_, err := cl.do(ctx, request{op: opDelete, args: [][]byte{[]byte(key)}})
	return err
}

func (cl *client) keys(keys []string) ([][]byte, error) {
	if len(keys) > maxArgs {
		return nil, errs.New(errs.Input, "rendezvous store at %s: %d keys in one call (at most %d)", cl.addr, len(keys), maxArgs)
	}
	args := make([][]byte, len(keys))
	for i, k := range keys {
		if err := checkKey(cl.addr, k); err != nil {
			return nil, err
		}
		args[i] = []byte(k)
	}
	return args, nil
}
