package rdzv

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// rankEnv is the environment of one rank as torchrun-style variables set by hand would give.
func rankEnv(t *testing.T, rank, world, port int, timeout time.Duration, extra ...string) Env {
	t.Helper()
	m := map[string]string{"RANK": strconv.Itoa(rank), "WORLD_SIZE": strconv.Itoa(world),
		"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": strconv.Itoa(port), EnvJob: strings.ReplaceAll(t.Name(), "/", "-"),
		EnvTimeout: timeout.String()}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	e, err := ParseEnv(lookupMap(m))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type joined struct {
	sess *Session
	err  error
	took time.Duration
}

func joinAll(envs []Env) []joined {
	out := make([]joined, len(envs))
	var wg sync.WaitGroup
	for i, e := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			s, err := Join(context.Background(), e)
			out[i] = joined{s, err, time.Since(start)}
		}()
	}
	wg.Wait()
	return out
}

func TestJoinFourRanksRankZeroServes(t *testing.T) {
	noLeak(t)
	port := freePort(t)
	var envs []Env
	for r := range 4 {
		envs = append(envs, rankEnv(t, r, 4, port, 10*time.Second))
	}
	res := joinAll(envs)
	for r, j := range res {
		if j.err != nil {
			t.Fatalf("rank %d: %v", r, j.err)
		}
	}
	// The store works after the join and keys live in the job's namespace.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := res[3].sess.Store.Set(ctx, res[3].sess.Key("x"), []byte("from 3")); err != nil {
		t.Fatal(err)
	}
	if v, err := res[1].sess.Store.Get(ctx, res[1].sess.Key("x")); err != nil || string(v) != "from 3" {
		t.Fatalf("get = %q %v", v, err)
	}
	if err := Barrier(ctx, res[0].sess.Store, res[0].sess.Key("b1"), 0, 1, "solo"); err != nil {
		t.Fatal(err)
	}
	for r := 3; r >= 0; r-- {
		if err := res[r].sess.Close(); err != nil {
			t.Errorf("close rank %d: %v", r, err)
		}
	}
}

func TestJoinThroughALauncherStore(t *testing.T) {
	noLeak(t)
	s := serve(t)
	var envs []Env
	for r := range 4 {
		envs = append(envs, rankEnv(t, r, 4, 1, 10*time.Second, EnvStore, "tcp://"+s.Addr()))
	}
	for r, j := range joinAll(envs) {
		if j.err != nil {
			t.Fatalf("rank %d: %v", r, j.err)
		}
		if j.sess.server != nil {
			t.Errorf("rank %d serves a store although the launcher does", r)
		}
		j.sess.Close()
	}
}

// A rank that never comes: every rank that came fails with E_COMM_INIT naming it, within the
// timeout (plus the verdict's short grace), never hangs.
func TestJoinMissingRank(t *testing.T) {
	noLeak(t)
	const timeout = 1500 * time.Millisecond
	for _, missing := range []int{3, 1} {
		t.Run(fmt.Sprint("rank", missing), func(t *testing.T) {
			port := freePort(t)
			var envs []Env
			for r := range 4 {
				if r != missing {
					envs = append(envs, rankEnv(t, r, 4, port, timeout))
				}
			}
			for _, j := range joinAll(envs) {
				checkMissing(t, j, fmt.Sprintf("rank %d of 4 did not arrive", missing), timeout)
			}
		})
	}
}

func checkMissing(t *testing.T, j joined, says string, timeout time.Duration) {
	t.Helper()
	if j.err == nil {
		j.sess.Close()
		t.Fatal("join succeeded without every rank")
	}
	if errs.CodeOf(j.err) != errs.CommInit || !strings.Contains(j.err.Error(), says) || strings.Contains(j.err.Error(), "\n") {
		t.Errorf("err %v, want one E_COMM_INIT line saying %q", j.err, says)
	}
	if j.took < timeout-100*time.Millisecond || j.took > timeout+verdictGrace {
		t.Errorf("failed after %s with timeout %s", j.took, timeout)
	}
}

// Rank 0 missing while a launcher serves the store: nobody announces a verdict, so every rank
// finds out for itself who is missing.
func TestJoinMissingRankZeroWithLauncherStore(t *testing.T) {
	noLeak(t)
	s := serve(t)
	const timeout = time.Second
	var envs []Env
	for r := 1; r < 4; r++ {
		envs = append(envs, rankEnv(t, r, 4, 1, timeout, EnvStore, "tcp://"+s.Addr()))
	}
	for _, j := range joinAll(envs) {
		checkMissing(t, j, "rank 0 of 4 did not arrive", timeout)
	}
}

// Rank 0 serves the store and never comes: the others cannot reach it and say so, naming rank 0.
func TestJoinMissingRankZeroServer(t *testing.T) {
	noLeak(t)
	port := freePort(t)
	const timeout = time.Second
	var envs []Env
	for r := 1; r < 3; r++ {
		envs = append(envs, rankEnv(t, r, 3, port, timeout))
	}
	for _, j := range joinAll(envs) {
		checkMissing(t, j, "rank 0 serves the store and did not come", timeout)
	}
}

func TestJoinDuplicateRank(t *testing.T) {
	noLeak(t)
	port := freePort(t)
	envs := []Env{rankEnv(t, 0, 3, port, 3*time.Second), rankEnv(t, 1, 3, port, 3*time.Second), rankEnv(t, 1, 3, port, 3*time.Second)}
	res := joinAll(envs)
	n := 0
	for _, j := range res {
		if j.err == nil {
			j.sess.Close()
			t.Fatal("join with a duplicated rank succeeded")
		}
		if strings.Contains(j.err.Error(), "rank 1 arrived twice") {
			n++
		}
		if errs.CodeOf(j.err) != errs.CommInit {
			t.Errorf("err %v", j.err)
		}
	}
	if n == 0 {
		t.Errorf("no rank named the duplicate: %v %v %v", res[0].err, res[1].err, res[2].err)
	}
}

func TestJoinWorldMismatch(t *testing.T) {
	noLeak(t)
	port := freePort(t)
	const timeout = time.Second
	envs := []Env{rankEnv(t, 0, 2, port, timeout), rankEnv(t, 1, 3, port, timeout)}
	res := joinAll(envs)
	checkMissing(t, res[0], "rank 1 of 2 did not arrive", timeout)
	checkMissing(t, res[1], "of 3 did not arrive", timeout)
}

func TestJoinPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Join(context.Background(), rankEnv(t, 0, 2, ln.Addr().(*net.TCPAddr).Port, time.Second))
	if errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("join on a port in use: %v", err)
	}
}
