package rdzv

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func TestParseEtcdURL(t *testing.T) {
	for _, c := range []struct {
		in, eps, prefix string
	}{
		{"etcd://127.0.0.1:2379", "127.0.0.1:2379", DefaultEtcdPrefix},
		{"etcd://a:1,b.example:2,[::1]:3", "a:1,b.example:2,[::1]:3", DefaultEtcdPrefix},
		{"etcd://h:2379/", "h:2379", DefaultEtcdPrefix},
		{"etcd://h:2379/team-a/rdzv_1.x", "h:2379", "/team-a/rdzv_1.x"},
		{"etcd://h:2379/p/", "h:2379", "/p"},
	} {
		u, err := ParseEtcdURL(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if got := strings.Join(u.Endpoints, ","); got != c.eps || u.Prefix != c.prefix {
			t.Errorf("%s: endpoints %s prefix %s, want %s %s", c.in, got, u.Prefix, c.eps, c.prefix)
		}
	}
	for _, in := range []string{
		"", "etcd://", "etcd:///p", "tcp://h:1", "etcd//h:1", "etcd://h", "etcd://h:", "etcd://:2379",
		"etcd://h:0", "etcd://h:65536", "etcd://h:+1", "etcd://h:01", "etcd://h:1,", "etcd://,h:1",
		"etcd://h:1,h:1", "etcd://u:p@h:1", "etcd://h:1?x=1", "etcd://h:1#f", "etcd://h:1//p",
		"etcd://h:1/a/../b", "etcd://h:1/a b", "etcd://h:1/a%2fb", "etcd://a b:1", "etcd://h:1\n",
		"etcd://[::1:1", "etcd://h:1/" + strings.Repeat("x", 3000),
	} {
		_, err := ParseEtcdURL(in)
		if errs.CodeOf(err) != errs.Input || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "want etcd://") {
			t.Errorf("%q: %v, want one E_INPUT line", in, err)
		}
	}
}

func FuzzEtcdURL(f *testing.F) {
	for _, s := range []string{"etcd://127.0.0.1:2379", "etcd://a:1,b:2/x/y", "etcd://[::1]:2379/", "etcd://h:1//", "etcd://h:99999", "etcd://@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseEtcdURL(s)
		if err != nil {
			if errs.CodeOf(err) != errs.Input || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if len(u.Endpoints) == 0 || !strings.HasPrefix(u.Prefix, "/") || strings.HasSuffix(u.Prefix, "/") || strings.Contains(u.Prefix, "//") {
			t.Fatalf("%q parsed to %+v", s, u)
		}
		// The canonical form parses to itself.
		v, err := ParseEtcdURL(u.String())
		if err != nil || v.String() != u.String() {
			t.Fatalf("%q -> %s -> %v %v", s, u, v, err)
		}
	})
}

// An endpoint where nothing listens: E_COMM_INIT naming it, within the deadline.
func TestDialEtcdUnreachable(t *testing.T) {
	noLeak(t)
	ep := "127.0.0.1:" + strconv.Itoa(freePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := DialEtcd(ctx, "etcd://"+ep+",127.0.0.1:1")
	took := time.Since(start)
	if errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), ep+",127.0.0.1:1") || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("err %v", err)
	}
	if took > 2500*time.Millisecond {
		t.Fatalf("took %s with a 1s deadline", took)
	}
	// Through Join: every rank fails the same way within TESSERA_RDZV_TIMEOUT.
	env := rankEnv(t, 1, 2, 1, 800*time.Millisecond, EnvStore, "etcd://"+ep)
	if !env.IsEtcd() || env.ServeStore {
		t.Fatalf("env %s", env)
	}
	start = time.Now()
	if _, err := Join(context.Background(), env); errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), ep) {
		t.Fatalf("join: %v", err)
	}
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Fatalf("join took %s with a 800ms timeout", d)
	}
}

func TestDialEtcdBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		url  string
		opts []EtcdOption
		says string
	}{
		{"etcd://h:0", nil, "want etcd://"},
		{"etcd://h:1", []EtcdOption{EtcdJob("a/b")}, "job"},
		{"etcd://h:1", []EtcdOption{EtcdJob("")}, "job"},
		{"etcd://h:1", []EtcdOption{EtcdTTL(time.Millisecond)}, "TTL"},
	} {
		if _, err := DialEtcd(ctx, c.url, c.opts...); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v", c.url, err)
		}
	}
}
