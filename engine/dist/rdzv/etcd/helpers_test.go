package etcd

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
)

// rankEnv is one rank's environment as torchrun would set it, with extra KEY, VALUE pairs.
func rankEnv(t *testing.T, rank, world, port int, timeout time.Duration, extra ...string) rdzv.Env {
	t.Helper()
	m := map[string]string{"RANK": strconv.Itoa(rank), "WORLD_SIZE": strconv.Itoa(world),
		"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": strconv.Itoa(port), rdzv.EnvJob: strings.ReplaceAll(t.Name(), "/", "-"),
		rdzv.EnvTimeout: timeout.String()}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	e, err := rdzv.ParseEnv(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type joined struct {
	sess *rdzv.Session
	err  error
	took time.Duration
}

func joinAll(envs []rdzv.Env) []joined {
	out := make([]joined, len(envs))
	var wg sync.WaitGroup
	for i, e := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			s, err := rdzv.Join(context.Background(), e)
			out[i] = joined{s, err, time.Since(start)}
		}()
	}
	wg.Wait()
	return out
}

// noLeak fails the test if it leaves goroutines behind (tests without an embedded server).
func noLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines before, %d after", before, runtime.NumGoroutine())
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
