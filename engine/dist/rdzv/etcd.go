package rdzv

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// The etcd store: the same Store over an etcd cluster, for clusters that run one
// (TESSERA_RDZV=etcd://host:port[,host:port...][/prefix]). No rank serves anything; every
// rank is a client of the cluster.
//
// Keys live under <prefix>/<job>/ (prefix /tessera/rdzv unless the URL names one), so jobs
// sharing a cluster never see each other's keys. Every key a client writes is attached to
// that client's lease (DefaultEtcdTTL, kept alive while the client is open): a key expires
// one TTL after the last client that wrote it closed or died, so a crashed job leaves nothing
// behind for long. Close does not revoke the lease: the other ranks may still read the keys.
//
// Every call is bounded by ctx's deadline (DefaultTimeout when it has none): etcd's client
// retries forever unless told otherwise.

// DefaultEtcdPrefix is where jobs' keys live when the URL names no prefix.
const DefaultEtcdPrefix = "/tessera/rdzv"

// DefaultEtcdTTL is the lease on a client's keys: how long they outlive the client.
const DefaultEtcdTTL = 60 * time.Second

// etcdTxnOps is how many operations one transaction carries (etcd's --max-txn-ops defaults
// to 128).
const etcdTxnOps = 64

// EtcdURL is a parsed etcd://host:port[,host:port...][/prefix].
type EtcdURL struct {
	Endpoints []string // host:port, at least one
	Prefix    string   // "/a/b", never ending in '/'; DefaultEtcdPrefix when the URL has none
}

func (u EtcdURL) String() string {
	return "etcd://" + strings.Join(u.Endpoints, ",") + u.Prefix
}

const etcdURLForm = "want etcd://host:port[,host:port...][/prefix]"

// ParseEtcdURL reads etcd://host:port[,host:port...][/prefix]. The prefix is one or more
// segments of letters, digits, '.', '_' and '-'. No user, query or fragment. A malformed URL
// is one E_INPUT line.
func ParseEtcdURL(s string) (EtcdURL, error) {
	bad := func(why string) (EtcdURL, error) {
		return EtcdURL{}, errs.New(errs.Input, "etcd URL %.80q: %s; %s", s, why, etcdURLForm)
	}
	if len(s) > 2000 {
		return bad("longer than 2000 bytes")
	}
	rest, ok := strings.CutPrefix(s, "etcd://")
	if !ok {
		return bad("not an etcd:// URL")
	}
	if i := strings.IndexAny(rest, "?#@ \t\r\n"); i >= 0 {
		return bad("unexpected " + strconv.QuoteRune(rune(rest[i])))
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if hosts == "" {
		return bad("no endpoint")
	}
	var u EtcdURL
	seen := map[string]bool{}
	for _, hp := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" {
			return bad("endpoint " + strconv.Quote(hp) + " is not host:port")
		}
		if _, err := checkHost("etcd endpoint", host); err != nil {
			return bad("endpoint " + strconv.Quote(hp) + " has no valid host")
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 || port != strconv.Itoa(p) {
			return bad("endpoint " + strconv.Quote(hp) + " has no port 1..65535")
		}
		ep := net.JoinHostPort(host, port)
		if seen[ep] {
			return bad("endpoint " + ep + " is named twice")
		}
		seen[ep] = true
		u.Endpoints = append(u.Endpoints, ep)
	}
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		u.Prefix = DefaultEtcdPrefix
		return u, nil
	}
	for _, seg := range strings.Split(path, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return bad("empty, '.' or '..' prefix segment")
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return bad("prefix byte " + strconv.QuoteRune(rune(c)) + " (want letters, digits, '.', '_', '-')")
			}
		}
	}
	u.Prefix = "/" + path
	return u, nil
}

// EtcdOption adjusts DialEtcd.
type EtcdOption func(*etcdOptions)

type etcdOptions struct {
	job string
	ttl time.Duration
}

// EtcdJob puts the store's keys under the job's namespace (default "default").
func EtcdJob(job string) EtcdOption { return func(o *etcdOptions) { o.job = job } }

// EtcdTTL sets the lease on the client's keys (default DefaultEtcdTTL; whole seconds, >= 1s).
func EtcdTTL(d time.Duration) EtcdOption { return func(o *etcdOptions) { o.ttl = d } }

type etcdStore struct {
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

// DialEtcd connects to the etcd cluster that url names (see ParseEtcdURL) and returns a Store
// whose keys live under <prefix>/<job>/. It waits for the cluster until ctx's deadline
// (DefaultTimeout when ctx has none), as Dial waits for a TCP store: an unreachable cluster is
// E_COMM_INIT naming the endpoints; a malformed URL or option E_INPUT.
func DialEtcd(ctx context.Context, url string, opts ...EtcdOption) (Store, error) {
	o := etcdOptions{job: "default", ttl: DefaultEtcdTTL}
	for _, f := range opts {
		f(&o)
	}
	if o.job == "" || len(o.job) > 200 || strings.ContainsAny(o.job, " \t\r\n/") {
		return nil, errs.New(errs.Input, "etcd rendezvous: job %.80q: want 1..200 characters without spaces or '/'", o.job)
	}
	if o.ttl < time.Second {
		return nil, errs.New(errs.Input, "etcd rendezvous: lease TTL %s: want at least 1s", o.ttl)
	}
	u, err := ParseEtcdURL(url)
	if err != nil {
		return nil, err
	}
	ctx, cancel := bounded(ctx, 0)
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
	s := &etcdStore{
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

func (s *etcdStore) Addr() string { return s.addr }

// newLease grants a lease in place of old (unless another call already replaced it) and
// starts keeping it alive.
func (s *etcdStore) newLease(ctx context.Context, old clientv3.LeaseID) (clientv3.LeaseID, error) {
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
func (s *etcdStore) keep(ctx context.Context, id clientv3.LeaseID) {
	defer s.wg.Done()
	for {
		if ch, err := s.cli.KeepAlive(ctx, id); err == nil {
			for range ch {
			}
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

func (s *etcdStore) currentLease() (clientv3.LeaseID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errs.New(errs.CommInit, "rendezvous store at %s: client closed", s.addr)
	}
	return s.lease, nil
}

// Close stops renewing the lease (the keys expire one TTL later unless other clients rewrite
// them) and closes the client's connections.
func (s *etcdStore) Close() error {
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
	s.wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return errs.New(errs.CommInit, "rendezvous store at %s: close: %v", s.addr, err)
	}
	return nil
}

// fail names a call that could not finish: the caller's deadline, a closed client, a value
// too large for the cluster, or the cluster's own error.
func (s *etcdStore) fail(ctx context.Context, op, key string, err error) error {
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
func (s *etcdStore) withLease(ctx context.Context, write func(clientv3.LeaseID) error) error {
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

func (s *etcdStore) Set(ctx context.Context, key string, value []byte) error {
	if err := checkKey(s.addr, key); err != nil {
		return err
	}
	ctx, cancel := bounded(ctx, 0)
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

func (s *etcdStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(s.addr, key); err != nil {
		return nil, err
	}
	ctx, cancel := bounded(ctx, 0)
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
func (s *etcdStore) watch(ctx context.Context, k string, prefix bool, rev int64, put func(key string, val []byte) bool) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRev(rev), clientv3.WithFilterDelete()}
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	for wr := range s.cli.Watch(wctx, k, opts...) {
		if wr.Canceled || wr.Err() != nil {
			break
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut && put(string(ev.Kv.Key), ev.Kv.Value) {
				return nil
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

func (s *etcdStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := checkKey(s.addr, key); err != nil {
		return 0, err
	}
	ctx, cancel := bounded(ctx, 0)
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

// check reads which keys exist, in transactions of etcdTxnOps reads, and returns the
// revision of the first (a key absent then and written later has a later revision).
func (s *etcdStore) check(ctx context.Context, keys []string) ([]bool, int64, error) {
	out := make([]bool, len(keys))
	var rev int64
	for lo := 0; lo < len(keys); lo += etcdTxnOps {
		hi := min(lo+etcdTxnOps, len(keys))
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

func (s *etcdStore) checkKeys(keys []string) error {
	if len(keys) > maxArgs {
		return errs.New(errs.Input, "rendezvous store at %s: %d keys in one call (at most %d)", s.addr, len(keys), maxArgs)
	}
	for _, k := range keys {
		if err := checkKey(s.addr, k); err != nil {
			return err
		}
	}
	return nil
}

func (s *etcdStore) Check(ctx context.Context, keys ...string) ([]bool, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if err := s.checkKeys(keys); err != nil {
		return nil, err
	}
	ctx, cancel := bounded(ctx, 0)
	defer cancel()
	present, _, err := s.check(ctx, keys)
	return present, err
}

func (s *etcdStore) Wait(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := s.checkKeys(keys); err != nil {
		return err
	}
	ctx, cancel := bounded(ctx, 0)
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

func (s *etcdStore) Delete(ctx context.Context, key string) error {
	if err := checkKey(s.addr, key); err != nil {
		return err
	}
	ctx, cancel := bounded(ctx, 0)
	defer cancel()
	if _, err := s.cli.Delete(ctx, s.ns+key); err != nil {
		return s.fail(ctx, "delete", key, err)
	}
	return nil
}

// clearPrefix deletes every key under prefix (Join's rank 0 clears a completed barrier).
func (s *etcdStore) clearPrefix(ctx context.Context, prefix string) error {
	ctx, cancel := bounded(ctx, 0)
	defer cancel()
	if _, err := s.cli.Delete(ctx, s.ns+prefix, clientv3.WithPrefix()); err != nil {
		return s.fail(ctx, "delete prefix", prefix, err)
	}
	return nil
}
