// Package etcd is the rendezvous store over an etcd cluster (TESSERA_RDZV=etcd://...). It is
// apart from package rdzv so that only programs that import it link etcd's client (and gRPC);
// importing it registers the store with rdzv.Join.
package etcd

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func init() {
	rdzv.RegisterEtcd(func(ctx context.Context, url, job string) (rdzv.Store, error) { return Dial(ctx, url, Job(job)) })
}

// The etcd store: the same Store over an etcd cluster, for clusters that run one
// (TESSERA_RDZV=etcd://host:port[,host:port...][/prefix]). No rank serves anything; every
// rank is a client of the cluster.
//
// Keys live under <prefix>/<job>/ (prefix /tessera/rdzv unless the URL names one), so jobs
// sharing a cluster never see each other's keys. Every key a client writes is attached to
// that client's lease (DefaultTTL, kept alive while the client is open): a key expires
// one TTL after the last client that wrote it closed or died, so a crashed job leaves nothing
// behind for long. Close does not revoke the lease: the other ranks may still read the keys.
//
// Every call is bounded by ctx's deadline (rdzv.DefaultTimeout when it has none): etcd's client
// retries forever unless told otherwise.

// DefaultTTL is the lease on a client's keys: how long they outlive the client.
const DefaultTTL = 60 * time.Second

// txnOps is how many operations one transaction carries (etcd's --max-txn-ops defaults
// to 128).
const txnOps = 64

// closeWait bounds Close's wait for the lease renewal to stop.
const closeWait = 5 * time.Second

// Option adjusts Dial.
type Option func(*options)

type options struct {
	job string
	ttl time.Duration
}

// Job puts the store's keys under the job's namespace (default "default").
func Job(job string) Option { return func(o *options) { o.job = job } }

// TTL sets the lease on the client's keys (default DefaultTTL; whole seconds, >= 1s).
func TTL(d time.Duration) Option { return func(o *options) { o.ttl = d } }

type store struct {
	cli  *clientv3.Client
	addr string // the URL and the job's namespace, for messages
	ns   string // "<prefix>/<job>/"
	ttl  int64  // seconds

	mu     sync.Mutex
	lease  clientv3.LeaseID
	stop   context.CancelFunc // stops the current lease's keeper
	closed bool
	wg     sync.WaitGroup
}

// Dial connects to the etcd cluster that url names (see rdzv.ParseEtcdURL) and returns a Store
// whose keys live under <prefix>/<job>/. It waits for the cluster until ctx's deadline
// (rdzv.DefaultTimeout when ctx has none), as Dial waits for a TCP store: an unreachable cluster is
// E_COMM_INIT naming the endpoints; a malformed URL or option E_INPUT.
func Dial(ctx context.Context, url string, opts ...Option) (rdzv.Store, error) {
	o := options{job: "default", ttl: DefaultTTL}
	for _, f := range opts {
		f(&o)
	}
	if o.job == "" || len(o.job) > 200 || strings.ContainsAny(o.job, " \t\r\n/") {
		return nil, errs.New(errs.Input, "etcd rendezvous: job %.80q: want 1..200 characters without spaces or '/'", o.job)
	}
	if o.ttl < time.Second {
		return nil, errs.New(errs.Input, "etcd rendezvous: lease TTL %s: want at least 1s", o.ttl)
	}
	u, err := rdzv.ParseEtcdURL(url)
	if err != nil {
		return nil, err
	}
	ctx, cancel := rdzv.Bounded(ctx, 0)
	defer cancel()
	eps := make([]string, len(u.Endpoints))
	for i, ep := range u.Endpoints {
		eps[i] = "http://" + ep
	}
	dl, _ := ctx.Deadline()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: eps,
		// Creating the client does not connect; DialTimeout bounds its own internal calls.
		DialTimeout:          max(time.Until(dl), time.Second),
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, errs.New(errs.CommInit, "etcd cluster at %s: %v", strings.Join(u.Endpoints, ","), err)
	}
	s := &store{
		cli:  cli,
		addr: u.String() + "/" + o.job,
		ns:   u.Prefix + "/" + o.job + "/",
		ttl:  int64((o.ttl + time.Second - 1) / time.Second),
	}
	// The first lease is the reachability check: it waits for a connection until ctx's
	// deadline, retrying what a starting cluster may answer (no leader yet).
	start := time.Now()
	backoff := 50 * time.Millisecond
	for {
		_, err = s.newLease(ctx, 0)
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil || permanent(err) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
	s.Close()
	why := err.Error()
	if ctx.Err() != nil {
		why = "no answer"
	}
	return nil, errs.New(errs.CommInit, "etcd cluster at %s unreachable after %s: %s", strings.Join(u.Endpoints, ","), time.Since(start).Round(time.Millisecond), why)
}

// permanent reports an etcd answer that retrying will not change (authentication required,
// a refused argument).
func permanent(err error) bool {
	code := grpcstatus.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	switch code {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition, codes.Unimplemented:
		return true
	}
	return false
}

func (s *store) Addr() string { return s.addr }

// newLease grants a lease in place of old (unless another call already replaced it) and
// starts keeping it alive.
func (s *store) newLease(ctx context.Context, old clientv3.LeaseID) (clientv3.LeaseID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errs.New(errs.CommInit, "rendezvous store at %s: client closed", s.addr)
	}
	if s.lease != old {
		return s.lease, nil
	}
	resp, err := s.cli.Grant(ctx, s.ttl)
	if err != nil {
		return 0, err
	}
	if s.stop != nil {
		s.stop()
	}
	kctx, stop := context.WithCancel(context.Background())
	s.lease, s.stop = resp.ID, stop
	s.wg.Add(1)
	go s.keep(kctx, resp.ID)
	return resp.ID, nil
}

// keep renews the lease until ctx ends. A broken keep-alive stream is reopened while the
// lease lives; once it has expired, the next write grants a new one.
func (s *store) keep(ctx context.Context, id clientv3.LeaseID) {
	defer s.wg.Done()
	for {
		if ch, err := s.cli.KeepAlive(ctx, id); err == nil {
			drain(ctx, ch)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := s.cli.TimeToLive(tctx, id)
		cancel()
		if err == nil && r.TTL <= 0 {
			return // expired: writes will grant a new lease
		}
	}
}

// drain reads keep-alive answers until the channel closes or ctx ends, whichever comes first:
// Close must not wait on the client library to close a channel.
func drain(ctx context.Context, ch <-chan *clientv3.LeaseKeepAliveResponse) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
		}
	}
}

func (s *store) currentLease() (clientv3.LeaseID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errs.New(errs.CommInit, "rendezvous store at %s: client closed", s.addr)
	}
	return s.lease, nil
}

// Close stops renewing the lease (the keys expire one TTL later unless other clients rewrite
// them) and closes the client's connections.
func (s *store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.stop != nil {
		s.stop()
	}
	s.mu.Unlock()
	err := s.cli.Close()
	// The renewal goroutine ends once its context is cancelled; a bounded wait keeps a stuck
	// client library from hanging the caller (the goroutine is then reported, not waited for).
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
		return errs.New(errs.CommInit, "rendezvous store at %s: close: lease renewal still running after %s", s.addr, closeWait)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return errs.New(errs.CommInit, "rendezvous store at %s: close: %v", s.addr, err)
	}
	return nil
}

// fail names a call that could not finish: the caller's deadline, a closed client, a value
// too large for the cluster, or the cluster's own error.
func (s *store) fail(ctx context.Context, op, key string, err error) error {
	var coded *errs.Error
	if errors.As(err, &coded) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		return errs.Wrap(errs.CommInit, cerr, "rendezvous store at %s: %s %q", s.addr, op, key)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errs.New(errs.CommInit, "rendezvous store at %s: client closed", s.addr)
	}
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || grpcstatus.Code(err) == codes.ResourceExhausted {
		return errs.New(errs.Input, "rendezvous store at %s: %s %q: %v (the cluster's --max-request-bytes)", s.addr, op, key, err)
	}
	return errs.New(errs.CommInit, "rendezvous store at %s: %s %q: %v", s.addr, op, key, err)
}

// withLease runs a write under the current lease, granting a new one once if the cluster no
// longer knows it (the client was cut off for longer than the TTL).
func (s *store) withLease(ctx context.Context, write func(clientv3.LeaseID) error) error {
	id, err := s.currentLease()
	if err != nil {
		return err
	}
	err = write(id)
	if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return err
	}
	if id, err = s.newLease(ctx, id); err != nil {
		return err
	}
	return write(id)
}

func (s *store) Set(ctx context.Context, key string, value []byte) error {
	if err := rdzv.CheckKey(s.addr, key); err != nil {
		return err
	}
	ctx, cancel := rdzv.Bounded(ctx, 0)
	defer cancel()
	err := s.withLease(ctx, func(id clientv3.LeaseID) error {
		_, err := s.cli.Put(ctx, s.ns+key, string(value), clientv3.WithLease(id))
		return err
	})
	if err != nil {
		return s.fail(ctx, "set", key, err)
	}
	return nil
}

func (s *store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := rdzv.CheckKey(s.addr, key); err != nil {
		return nil, err
	}
	ctx, cancel := rdzv.Bounded(ctx, 0)
	defer cancel()
	k := s.ns + key
	for {
		resp, err := s.cli.Get(ctx, k)
		if err != nil {
			return nil, s.fail(ctx, "get", key, err)
		}
		if len(resp.Kvs) > 0 {
			return resp.Kvs[0].Value, nil
		}
		var v []byte
		err = s.watch(ctx, k, false, resp.Header.Revision+1, func(kv string, val []byte) bool {
			v = val
			return true
		})
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, errRewatch) {
			return nil, s.fail(ctx, "get", key, err)
		}
	}
}

// errRewatch says a watch ended without an answer in a way that a fresh look may fix
// (history compacted, stream broken): read again, then watch from the new revision.
var errRewatch = errors.New("watch interrupted")

// watch calls put for every key written under k (a prefix when prefix) from revision rev on,
// until put returns true (nil), ctx ends (its error) or the watch breaks (errRewatch).
func (s *store) watch(ctx context.Context, k string, prefix bool, rev int64, put func(key string, val []byte) bool) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRev(rev), clientv3.WithFilterDelete()}
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	// The loop selects on ctx as well as ranging over the channel: a watch channel the client
	// does not close (a stream being re-established when ctx ends) must not outlive the deadline.
	wch := s.cli.Watch(wctx, k, opts...)
watching:
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case wr, ok := <-wch:
			if !ok || wr.Canceled || wr.Err() != nil {
				break watching
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut && put(string(ev.Kv.Key), ev.Kv.Value) {
					return nil
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.currentLease(); err != nil {
		return err // closed
	}
	// Give a failing cluster a moment before looking again.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(50 * time.Millisecond):
	}
	return errRewatch
}

func (s *store) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := rdzv.CheckKey(s.addr, key); err != nil {
		return 0, err
	}
	ctx, cancel := rdzv.Bounded(ctx, 0)
	defer cancel()
	k := s.ns + key
	resp, err := s.cli.Get(ctx, k)
	if err != nil {
		return 0, s.fail(ctx, "add", key, err)
	}
	kvs := resp.Kvs
	for {
		// The counter as last read; absent counts as 0 (mod revision 0 compares equal to an
		// absent key).
		var cur, modRev int64
		if len(kvs) > 0 {
			modRev = kvs[0].ModRevision
			if cur, err = strconv.ParseInt(string(kvs[0].Value), 10, 64); err != nil {
				return 0, errs.New(errs.Input, "rendezvous store at %s: add to key %q whose value %.40q is not a counter", s.addr, key, kvs[0].Value)
			}
		}
		n := cur + delta
		var tr *clientv3.TxnResponse
		err := s.withLease(ctx, func(id clientv3.LeaseID) error {
			var err error
			tr, err = s.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(k), "=", modRev)).
				Then(clientv3.OpPut(k, strconv.FormatInt(n, 10), clientv3.WithLease(id))).
				Else(clientv3.OpGet(k)).
				Commit()
			return err
		})
		if err != nil {
			return 0, s.fail(ctx, "add", key, err)
		}
		if tr.Succeeded {
			return n, nil
		}
		// Someone else wrote in between: retry on what they wrote.
		kvs = tr.Responses[0].GetResponseRange().Kvs
	}
}

// check reads which keys exist, in transactions of txnOps reads, and returns the
// revision of the first (a key absent then and written later has a later revision).
func (s *store) check(ctx context.Context, keys []string) ([]bool, int64, error) {
	out := make([]bool, len(keys))
	var rev int64
	for lo := 0; lo < len(keys); lo += txnOps {
		hi := min(lo+txnOps, len(keys))
		ops := make([]clientv3.Op, 0, hi-lo)
		for _, k := range keys[lo:hi] {
			ops = append(ops, clientv3.OpGet(s.ns+k, clientv3.WithCountOnly()))
		}
		tr, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, 0, s.fail(ctx, "check", keys[lo], err)
		}
		if lo == 0 {
			rev = tr.Header.Revision
		}
		for i, r := range tr.Responses {
			out[lo+i] = r.GetResponseRange().Count > 0
		}
	}
	return out, rev, nil
}

func (s *store) checkKeys(keys []string) error {
	if len(keys) > rdzv.MaxKeys {
		return errs.New(errs.Input, "rendezvous store at %s: %d keys in one call (at most %d)", s.addr, len(keys), rdzv.MaxKeys)
	}
	for _, k := range keys {
		if err := rdzv.CheckKey(s.addr, k); err != nil {
			return err
		}
	}
	return nil
}

func (s *store) Check(ctx context.Context, keys ...string) ([]bool, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if err := s.checkKeys(keys); err != nil {
		return nil, err
	}
	ctx, cancel := rdzv.Bounded(ctx, 0)
	defer cancel()
	present, _, err := s.check(ctx, keys)
	return present, err
}

func (s *store) Wait(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := s.checkKeys(keys); err != nil {
		return err
	}
	ctx, cancel := rdzv.Bounded(ctx, 0)
	defer cancel()
	for {
		present, rev, err := s.check(ctx, keys)
		if err != nil {
			return err
		}
		missing := map[string]bool{}
		for i, ok := range present {
			if !ok {
				missing[s.ns+keys[i]] = true
			}
		}
		if len(missing) == 0 {
			return nil
		}
		// One watch over the job's namespace sees every missing key's write.
		err = s.watch(ctx, s.ns, true, rev+1, func(k string, _ []byte) bool {
			delete(missing, k)
			return len(missing) == 0
		})
		if err == nil {
			return nil
		}
		if !errors.Is(err, errRewatch) {
			var first string
			for i, ok := range present {
				if !ok {
					first = keys[i]
					break
				}
			}
			return s.fail(ctx, "wait", first, err)
		}
	}
}

func (s *store) Delete(ctx context.Context, key string) error {
	if err := rdzv.CheckKey(s.addr, key); err != nil {
		return err
	}
	ctx, cancel := rdzv.Bounded(ctx, 0)
	defer cancel()
	if _, err := s.cli.Delete(ctx, s.ns+key); err != nil {
		return s.fail(ctx, "delete", key, err)
	}
	return nil
}

// ClearPrefix deletes every key under prefix (Join's rank 0 clears a completed barrier).
func (s *store) ClearPrefix(ctx context.Context, prefix string) error {
	ctx, cancel := rdzv.Bounded(ctx, 0)
	defer cancel()
	if _, err := s.cli.Delete(ctx, s.ns+prefix, clientv3.WithPrefix()); err != nil {
		return s.fail(ctx, "delete prefix", prefix, err)
	}
	return nil
}
