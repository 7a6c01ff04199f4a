package etcd

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func TestDialUnreachable(t *testing.T) {
	noLeak(t)
	ep := "127.0.0.1:" + strconv.Itoa(freePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := Dial(ctx, "etcd://"+ep+",127.0.0.1:1")
	took := time.Since(start)
	if errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), ep+",127.0.0.1:1") || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("err %v", err)
	}
	if took > 2500*time.Millisecond {
		t.Fatalf("took %s with a 1s deadline", took)
	}
	// Through Join: every rank fails the same way within TESSERA_RDZV_TIMEOUT.
	env := rankEnv(t, 1, 2, 1, 800*time.Millisecond, rdzv.EnvStore, "etcd://"+ep)
	if !env.IsEtcd() || env.ServeStore {
		t.Fatalf("env %s", env)
	}
	start = time.Now()
	if _, err := rdzv.Join(context.Background(), env); errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), ep) {
		t.Fatalf("join: %v", err)
	}
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Fatalf("join took %s with a 800ms timeout", d)
	}
}

func TestDialBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		url  string
		opts []Option
		says string
	}{
		{"etcd://h:0", nil, "want etcd://"},
		{"etcd://h:1", []Option{Job("a/b")}, "job"},
		{"etcd://h:1", []Option{Job("")}, "job"},
		{"etcd://h:1", []Option{TTL(time.Millisecond)}, "TTL"},
	} {
		if _, err := Dial(ctx, c.url, c.opts...); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v", c.url, err)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
