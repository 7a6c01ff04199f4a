package rdzv

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Server is the TCP key-value store one process of a job (rank 0, or the launcher) serves.
type Server struct {
	ln   net.Listener
	addr string

	mu      sync.Mutex
	data    map[string][]byte
	changed chan struct{} // closed and replaced on every change, waking every waiter
	conns   map[net.Conn]struct{}
	closed  bool

	done chan struct{}
	wg   sync.WaitGroup
}

// Serve listens on addr (host:port; port 0 picks a free one, see Addr) and serves the store
// until Close. ctx bounds only the setup. A port already in use is E_COMM_INIT naming it.
func Serve(ctx context.Context, addr string) (*Server, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, errs.New(errs.CommInit, "rendezvous store: cannot listen on %s: %v", addr, unwrapOp(err))
	}
	s := &Server{ln: ln, data: map[string][]byte{}, changed: make(chan struct{}),
		conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	s.addr = publishedAddr(addr, ln.Addr().(*net.TCPAddr).Port)
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// publishedAddr is addr with its port filled in; a wildcard host becomes the loopback address
// so that the address works at least on this host.
func publishedAddr(addr string, port int) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// Addr is the address clients dial (host:port with the real port).
func (s *Server) Addr() string { return s.addr }

// Close stops the server, drops every connection and waits for its goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// closeWhenIdle closes the server once no client is connected, or after max.
func (s *Server) closeWhenIdle(max time.Duration) error {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		n := len(s.conns)
		s.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s.Close()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			// A transient error (too many open files): back off instead of spinning.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	// A client has a few seconds to greet; anything else (a port scanner, a stray transport
	// peer) is dropped without an answer.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	h := make([]byte, 8)
	if _, err := io.ReadFull(r, h); err != nil || checkHello(h) != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	if _, err := w.Write(hello()); err != nil || w.Flush() != nil {
		return
	}
	for {
		q, err := readRequest(r)
		if err != nil {
			return
		}
		p, ok := s.handle(q)
		if !ok {
			return
		}
		if err := writeResponse(w, p); err != nil {
			return
		}
	}
}

func bad(format string, args ...any) response {
	return response{st: stBad, args: [][]byte{[]byte(errs.New(errs.Input, format, args...).Msg)}}
}

// handle answers one request; ok is false when the server is closing.
func (s *Server) handle(q request) (response, bool) {
	for _, a := range q.args[:min(len(q.args), 1)] {
		if len(a) == 0 || len(a) > maxKeyBytes {
			return bad("key of %d bytes (want 1..%d)", len(a), maxKeyBytes), true
		}
	}
	switch q.op {
	case opPing:
		return response{}, true
	case opSet:
		if len(q.args) != 2 {
			return bad("set takes a key and a value"), true
		}
		s.mu.Lock()
		s.data[string(q.args[0])] = q.args[1]
		s.notify()
		s.mu.Unlock()
		return response{}, true
	case opDelete:
		if len(q.args) != 1 {
			return bad("delete takes one key"), true
		}
		s.mu.Lock()
		delete(s.data, string(q.args[0]))
		s.notify()
		s.mu.Unlock()
		return response{}, true
	case opAdd:
		if len(q.args) != 2 || len(q.args[1]) != 8 {
			return bad("add takes a key and an 8-byte delta"), true
		}
		delta := int64(leUint64(q.args[1]))
		key := string(q.args[0])
		s.mu.Lock()
		defer s.mu.Unlock()
		var cur int64
		if v, ok := s.data[key]; ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return bad("add to key %q whose value %.40q is not a counter", key, v), true
			}
			cur = n
		}
		cur += delta
		s.data[key] = []byte(strconv.FormatInt(cur, 10))
		s.notify()
		return response{args: [][]byte{[]byte(strconv.FormatInt(cur, 10))}}, true
	case opCheck:
		out := make([]byte, len(q.args))
		s.mu.Lock()
		for i, k := range q.args {
			if _, ok := s.data[string(k)]; ok {
				out[i] = 1
			}
		}
		s.mu.Unlock()
		return response{args: [][]byte{out}}, true
	case opGet, opWait:
		if len(q.args) == 0 || (q.op == opGet && len(q.args) != 1) {
			return bad("%s takes keys", opNames[q.op]), true
		}
		return s.wait(q)
	}
	return bad("unknown store operation %d", q.op), true
}

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait answers get and wait once every key is set, or stTimeout after the request's wait.
func (s *Server) wait(q request) (response, bool) {
	timer := time.NewTimer(time.Duration(q.waitMs) * time.Millisecond)
	defer timer.Stop()
	for {
		s.mu.Lock()
		all := true
		for _, k := range q.args {
			if _, ok := s.data[string(k)]; !ok {
				all = false
				break
			}
		}
		var val []byte
		if all && q.op == opGet {
			val = s.data[string(q.args[0])]
		}
		ch := s.changed
		s.mu.Unlock()
		if all {
			if q.op == opGet {
				return response{args: [][]byte{val}}, true
			}
			return response{}, true
		}
		select {
		case <-ch:
		case <-timer.C:
			return response{st: stTimeout}, true
		case <-s.done:
			return response{}, false
		}
	}
}

func leUint64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// unwrapOp drops net.OpError's repetition of the address so messages name it once.
func unwrapOp(err error) error {
	if oe, ok := err.(*net.OpError); ok && oe.Err != nil {
		return oe.Err
	}
	return err
}
