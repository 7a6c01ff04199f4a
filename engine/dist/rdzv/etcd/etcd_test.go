package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv/storetest"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// startEtcd runs a one-member etcd cluster in this process on free loopback ports, its data
// in a temporary folder, closed when t ends. It returns the client endpoint (host:port).
func startEtcd(t testing.TB) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "rdzv-test"
	cfg.Dir = t.TempDir()
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port may be taken before etcd binds it
		cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", freePortTB(t))}
		pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", freePortTB(t))}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		cfg.InitialCluster = cfg.Name + "=" + pu.String()
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			continue
		}
		select {
		case <-e.Server.ReadyNotify():
		case <-time.After(30 * time.Second):
			e.Close()
			t.Fatal("embedded etcd not ready after 30s")
		}
		t.Cleanup(e.Close)
		return cu.Host
	}
	t.Fatalf("embedded etcd: %v", lastErr)
	return ""
}

// etcdNoLeak fails t if goroutines of the etcd client or of the store, started during the
// test, outlive it. (noLeak's count does not work here: the embedded server starts and ends
// goroutines of its own as it pleases.)
func etcdNoLeak(t *testing.T) {
	t.Helper()
	before := goroutines()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			var leaked []string
			for id, st := range goroutines() {
				if _, old := before[id]; !old && (strings.Contains(st, "go.etcd.io/etcd/client/v3") || strings.Contains(st, "etcd.(*store)")) {
					leaked = append(leaked, st)
				}
			}
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines of the etcd client outlive the test:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// goroutines maps each goroutine's id to its stack.
func goroutines() map[string]string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	out := map[string]string{}
	for _, st := range strings.Split(string(buf), "\n\n") {
		if id, _, ok := strings.Cut(strings.TrimPrefix(st, "goroutine "), " "); ok {
			out[id] = st
		}
	}
	return out
}

func freePortTB(t testing.TB) int {
	if tt, ok := t.(*testing.T); ok {
		return freePort(tt)
	}
	t.Fatal("freePortTB wants a *testing.T")
	return 0
}

func dialEtcd(t *testing.T, ep string, opts ...Option) rdzv.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := Dial(ctx, "etcd://"+ep, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// rawEtcd is a plain etcd client, to look at what the store left in the cluster.
func rawEtcd(t *testing.T, ep string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The rdzv.Store contract (storetest), then what is etcd's own: Check over more keys than one
// transaction carries, etcd's value limit, bounded waits, a closed client.
func TestEtcdStoreOperations(t *testing.T) {
	ep := startEtcd(t)
	etcdNoLeak(t)
	job := Job("ops")
	a, b := dialEtcd(t, ep, job), dialEtcd(t, ep, job)
	storetest.Contract(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Check over more keys than one transaction carries.
	many := make([]string, 150)
	for i := range many {
		many[i] = fmt.Sprint("m", i)
	}
	a.Set(ctx, "m149", nil)
	if p, err := b.Check(ctx, many...); err != nil || len(p) != 150 || p[0] || !p[149] {
		t.Fatalf("check of 150 keys: %v", err)
	}
	if err := a.Set(ctx, "huge", make([]byte, 3<<20)); errs.CodeOf(err) != errs.Input {
		t.Fatalf("3 MiB value: %v", err)
	}
	// Calls are bounded: a Get and a Wait of keys nobody sets end at the deadline.
	sctx, scancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer scancel()
	start := time.Now()
	_, err := b.Get(sctx, "never")
	if errs.CodeOf(err) != errs.CommInit || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `"never"`) || !strings.Contains(err.Error(), "etcd://"+ep) {
		t.Fatalf("get of a missing key: %v", err)
	}
	if err := b.Wait(sctx, "w1", "never2"); errs.CodeOf(err) != errs.CommInit || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait for a missing key: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timed out after %s", d)
	}
	// A closed client fails calls promptly.
	a.Close()
	if err := a.Set(ctx, "x", nil); errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("set on a closed client: %v", err)
	}
}

// Two jobs on one cluster never see each other's keys; keys sit under <prefix>/<job>/ with a
// lease, and expire after the TTL once their client is gone.
func TestEtcdJobsIsolatedAndLeased(t *testing.T) {
	ep := startEtcd(t)
	etcdNoLeak(t)
	raw := rawEtcd(t, ep)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := dialEtcd(t, ep, Job("job-a"))
	b := dialEtcd(t, ep, Job("job-b"))
	if err := a.Set(ctx, "k", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Add(ctx, "n", 5); err != nil || n != 5 {
		t.Fatalf("add %d %v", n, err)
	}
	if p, err := b.Check(ctx, "k", "n"); err != nil || p[0] || p[1] {
		t.Fatalf("job b sees job a's keys: %v %v", p, err)
	}
	if n, err := b.Add(ctx, "n", 1); err != nil || n != 1 {
		t.Fatalf("job b's counter %d %v", n, err)
	}
	sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer scancel()
	if _, err := b.Get(sctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("job b got job a's key: %v", err)
	}
	b.Set(ctx, "k", []byte("b"))
	if v, _ := a.Get(ctx, "k"); string(v) != "a" {
		t.Fatalf("job a reads %q", v)
	}
	// A URL prefix moves the namespace.
	c := dialEtcd(t, ep+"/team/x", Job("job-a"), TTL(2*time.Second))
	if p, _ := c.Check(ctx, "k"); p[0] {
		t.Fatal("another prefix sees the default prefix's keys")
	}
	c.Set(ctx, "short", []byte("lived"))
	resp, err := raw.Get(ctx, "/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
		if kv.Lease == 0 {
			t.Errorf("key %s has no lease", kv.Key)
		}
	}
	want := "/team/x/job-a/short /tessera/rdzv/job-a/k /tessera/rdzv/job-a/n /tessera/rdzv/job-b/k /tessera/rdzv/job-b/n"
	if got := strings.Join(keys, " "); got != want {
		t.Fatalf("keys in the cluster:\n%s\nwant\n%s", got, want)
	}
	// Closed (or crashed) client: its keys go when its lease runs out.
	c.Close()
	deadline := time.Now().Add(8 * time.Second)
	for {
		r, err := raw.Get(ctx, "/team/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if r.Count == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("keys of a closed client with a 2s lease still there after 8s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The open clients' keys stay.
	if p, _ := a.Check(ctx, "k"); !p[0] {
		t.Fatal("an open client's key expired")
	}
}

// Add is atomic under contention from many clients (the transaction loop retries on a
// changed mod revision).
func TestEtcdAddAtomic(t *testing.T) {
	ep := startEtcd(t)
	etcdNoLeak(t)
	const clients, each = 4, 25
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	results := make(chan int64, clients*each)
	for c := range clients {
		st := dialEtcd(t, ep, Job("add"))
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each/2+g*(each%2); i++ {
					n, err := st.Add(ctx, "ctr", 1)
					if err != nil {
						t.Errorf("client %d: %v", c, err)
						return
					}
					results <- n
				}
			}()
		}
	}
	wg.Wait()
	close(results)
	seen := map[int64]bool{}
	for n := range results {
		if seen[n] {
			t.Fatalf("sum %d returned twice", n)
		}
		seen[n] = true
	}
	if len(seen) != clients*each || !seen[1] || !seen[clients*each] {
		t.Fatalf("%d distinct sums, want 1..%d", len(seen), clients*each)
	}
}

func etcdEnvs(t *testing.T, ep string, world int, timeout time.Duration, ranks ...int) []rdzv.Env {
	var envs []rdzv.Env
	for _, r := range ranks {
		e := rankEnv(t, r, world, 1, timeout, rdzv.EnvStore, "etcd://"+ep)
		if !e.IsEtcd() || e.ServeStore {
			t.Fatalf("rank %d: %s", r, e)
		}
		envs = append(envs, e)
	}
	return envs
}

func TestEtcdJoinFourRanks(t *testing.T) {
	ep := startEtcd(t)
	etcdNoLeak(t)
	res := joinAll(etcdEnvs(t, ep, 4, 10*time.Second, 0, 1, 2, 3))
	for r, j := range res {
		if j.err != nil {
			t.Fatalf("rank %d: %v", r, j.err)
		}
		if j.sess.Env.ServeStore {
			t.Errorf("rank %d serves a store although etcd does", r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := res[3].sess.Store.Set(ctx, res[3].sess.Key("x"), []byte("from 3")); err != nil {
		t.Fatal(err)
	}
	if v, err := res[1].sess.Store.Get(ctx, res[1].sess.Key("x")); err != nil || string(v) != "from 3" {
		t.Fatalf("get = %q %v", v, err)
	}
	if !strings.Contains(res[0].sess.Store.Addr(), "/tessera/rdzv/"+res[0].sess.Env.JobID) {
		t.Errorf("addr %s does not name the job's namespace", res[0].sess.Store.Addr())
	}
	// Rank 0 cleared the completed barrier: the same job id can run again at once.
	again := joinAll(etcdEnvs(t, ep, 4, 10*time.Second, 0, 1, 2, 3))
	for r, j := range again {
		if j.err != nil {
			t.Fatalf("second run, rank %d: %v", r, j.err)
		}
		j.sess.Close()
	}
	for r := 3; r >= 0; r-- {
		if err := res[r].sess.Close(); err != nil {
			t.Errorf("close rank %d: %v", r, err)
		}
	}
}

// A rank that never comes: every rank that came fails with E_COMM_INIT naming it within the
// timeout (plus the verdict's grace), as over the TCP store; rank 0 missing is no different,
// since nobody serves anything.
func TestEtcdJoinMissingRank(t *testing.T) {
	ep := startEtcd(t)
	const timeout = 1500 * time.Millisecond
	for _, missing := range []int{3, 0} {
		t.Run(fmt.Sprint("rank", missing), func(t *testing.T) {
			etcdNoLeak(t)
			var ranks []int
			for r := range 4 {
				if r != missing {
					ranks = append(ranks, r)
				}
			}
			for i, j := range joinAll(etcdEnvs(t, ep, 4, timeout, ranks...)) {
				if j.err == nil {
					j.sess.Close()
					t.Fatalf("rank %d joined a world missing rank %d", ranks[i], missing)
				}
				want := fmt.Sprintf("rank %d of 4 did not arrive", missing)
				if errs.CodeOf(j.err) != errs.CommInit || !strings.Contains(j.err.Error(), want) {
					t.Errorf("rank %d: %v, want E_COMM_INIT saying %q", ranks[i], j.err, want)
				}
				if j.took > timeout+3*time.Second+2*time.Second {
					t.Errorf("rank %d gave up after %s", ranks[i], j.took)
				}
			}
		})
	}
}
