package rdzv

import (
	"context"
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

func TestEtcdWithoutTheStorePackageIsUnsupported(t *testing.T) {
	env := rankEnv(t, 0, 1, 1, time.Second, EnvStore, "etcd://127.0.0.1:2379")
	if _, err := Join(context.Background(), env); errs.CodeOf(err) != errs.Unsupported || !strings.Contains(err.Error(), "rdzv/etcd") {
		t.Fatalf("want E_UNSUPPORTED naming the package to import, got %v", err)
	}
}
