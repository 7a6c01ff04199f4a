package rdzv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// verdictGrace is how long the ranks of a failed barrier keep talking after the deadline:
// rank 0 announces the verdict (who is missing) and waits up to this long for the others to
// read it before it returns (and, when it serves the store, closes it).
const verdictGrace = 3 * time.Second

// poison is added to a barrier's arrival counter by rank 0 when it gives up, so that a rank
// arriving later can never complete the barrier and knows at once that it failed.
const poison = 1 << 40

// Barrier returns when all world ranks have called it with the same name, or fails with
// E_COMM_INIT naming the ranks that did not come by ctx's deadline (on every rank that did
// come: rank 0 announces the verdict through the store, and a rank that hears nothing looks
// for itself). When Barrier returns nil on rank 0, no other rank needs the barrier's keys
// any more, so rank 0 may then close a store it serves. info is stored as this rank's
// announcement (shown in messages); names must not be reused within one store.
func Barrier(ctx context.Context, s Store, name string, rank, world int, info string) error {
	ctx, cancel := bounded(ctx, 0)
	defer cancel()
	start := time.Now()
	b := barrier{s: s, name: name, rank: rank, world: world}
	if rank < 0 || rank >= world {
		return errs.New(errs.Input, "barrier %s: rank %d outside world %d", name, rank, world)
	}
	claims, err := s.Add(ctx, b.key("claim", rank), 1)
	if err != nil {
		return b.wrap(err)
	}
	if claims > 1 {
		prev, _ := s.Get(ctx, b.key("rank", rank))
		msg := fmt.Sprintf("rank %d arrived twice (first %s, then %s): two processes were given the same rank", rank, prev, info)
		s.Set(ctx, b.key("done"), []byte("fail 0 "+msg))
		return b.fail(msg)
	}
	if err := s.Set(ctx, b.key("rank", rank), []byte(info)); err != nil {
		return b.wrap(err)
	}
	n, err := s.Add(ctx, b.key("count"), 1)
	if err != nil {
		return b.wrap(err)
	}
	if n == int64(world) {
		if err := s.Set(ctx, b.key("done"), []byte("ok")); err != nil {
			return b.wrap(err)
		}
	}
	v, err := s.Get(ctx, b.key("done"))
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return b.wrap(err)
		}
		// Our deadline passed: rank 0 decides; the others ask whether it has.
		gctx, gcancel := context.WithTimeout(context.Background(), verdictGrace)
		defer gcancel()
		if rank == 0 {
			return b.decide(gctx, time.Since(start))
		}
		if present, cerr := s.Check(gctx, b.key("done")); cerr == nil && present[0] {
			v, err = s.Get(gctx, b.key("done"))
		}
		if err != nil {
			msg := b.diagnose(gctx, time.Since(start))
			s.Add(gctx, b.key("ack"), 1)
			return b.fail(msg)
		}
	}
	if verdict := string(v); verdict != "ok" {
		// Our own deadline may have passed already: the acknowledgement gets its own.
		actx, acancel := context.WithTimeout(context.Background(), verdictGrace)
		defer acancel()
		s.Add(actx, b.key("ack"), 1)
		_, msg := parseFail(verdict)
		return b.fail(msg)
	}
	return b.leave(ctx)
}

type barrier struct {
	s           Store
	name        string
	rank, world int
}

func (b *barrier) key(parts ...any) string {
	var sb strings.Builder
	sb.WriteString(b.name)
	for _, p := range parts {
		fmt.Fprintf(&sb, "/%v", p)
	}
	return sb.String()
}

func (b *barrier) fail(msg string) error {
	return errs.New(errs.CommInit, "rank %d: rendezvous %s at %s: %s", b.rank, b.name, b.s.Addr(), msg)
}

func (b *barrier) wrap(err error) error {
	return errs.Wrap(errs.CommInit, err, "rank %d: rendezvous %s", b.rank, b.name)
}

// leave makes rank 0 wait until every other rank has read the verdict.
func (b *barrier) leave(ctx context.Context) error {
	if b.world == 1 {
		return nil
	}
	if dl, _ := ctx.Deadline(); time.Until(dl) < verdictGrace {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), verdictGrace)
		defer cancel()
	}
	if b.rank != 0 {
		l, err := b.s.Add(ctx, b.key("left"), 1)
		if err != nil {
			return b.wrap(err)
		}
		if l == int64(b.world-1) {
			if err := b.s.Set(ctx, b.key("gone"), []byte("1")); err != nil {
				return b.wrap(err)
			}
		}
		return nil
	}
	if _, err := b.s.Get(ctx, b.key("gone")); err != nil {
		return b.wrap(err)
	}
	return nil
}

// decide is rank 0 at its deadline: close the barrier to latecomers, and either find that it
// completed after all or tell everyone who is missing.
func (b *barrier) decide(ctx context.Context, waited time.Duration) error {
	m, err := b.s.Add(ctx, b.key("count"), poison)
	if err != nil {
		return b.wrap(err)
	}
	arrived := m - poison
	if arrived >= int64(b.world) {
		v, err := b.s.Get(ctx, b.key("done"))
		if err != nil {
			return b.wrap(err)
		}
		if string(v) == "ok" {
			return b.leave(ctx)
		}
		_, msg := parseFail(string(v))
		return b.fail(msg)
	}
	msg := b.diagnose(ctx, waited)
	if err := b.s.Set(ctx, b.key("done"), []byte(fmt.Sprintf("fail %d %s", arrived, msg))); err != nil {
		return b.fail(msg)
	}
	// Keep answering until the ranks that came have read the verdict (or the grace ends).
	for arrived > 1 {
		acks, err := b.s.Add(ctx, b.key("ack"), 0)
		if err != nil || acks >= arrived-1 {
			break
		}
		select {
		case <-ctx.Done():
			return b.fail(msg)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return b.fail(msg)
}

// diagnose names the ranks whose announcements are missing.
func (b *barrier) diagnose(ctx context.Context, waited time.Duration) string {
	keys := make([]string, b.world)
	for r := range keys {
		keys[r] = b.key("rank", r)
	}
	present, err := b.s.Check(ctx, keys...)
	if err != nil {
		return fmt.Sprintf("not every rank of %d arrived within %s, and the store could not say which: %v", b.world, waited.Round(time.Millisecond), err)
	}
	var missing []int
	for r, ok := range present {
		if !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) == 0 {
		return fmt.Sprintf("every rank of %d announced itself but the barrier did not complete within %s", b.world, waited.Round(time.Millisecond))
	}
	word := "rank"
	if len(missing) > 1 {
		word = "ranks"
	}
	return fmt.Sprintf("%s %s of %d did not arrive within %s", word, FormatRanks(missing), b.world, waited.Round(time.Millisecond))
}

func parseFail(v string) (int, string) {
	rest, ok := strings.CutPrefix(v, "fail ")
	if !ok {
		return 0, "unexpected verdict " + strconv.Quote(v)
	}
	num, msg, _ := strings.Cut(rest, " ")
	n, _ := strconv.Atoi(num)
	return n, msg
}

// FormatRanks prints sorted ranks compactly: 2,3,4,7 as "2-4,7".
func FormatRanks(rs []int) string {
	var sb strings.Builder
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		switch {
		case j == i:
			fmt.Fprintf(&sb, "%d", rs[i])
		case j == i+1:
			fmt.Fprintf(&sb, "%d,%d", rs[i], rs[j])
		default:
			fmt.Fprintf(&sb, "%d-%d", rs[i], rs[j])
		}
		i = j + 1
	}
	return sb.String()
}

// Session is a rank's membership in a job after Join: its place, a store client, and the
// store server when this rank serves it.
type Session struct {
	Env    Env
	Store  Store
	server *Server
}

func (s *Session) Rank() int  { return s.Env.Rank }
func (s *Session) World() int { return s.Env.World }

// Key namespaces a key under the session's job.
func (s *Session) Key(parts ...string) string {
	return "tessera/" + s.Env.JobID + "/" + strings.Join(parts, "/")
}

// Close releases the store client and, on the rank that serves it, the store.
func (s *Session) Close() error {
	err := s.Store.Close()
	if s.server != nil {
		if e := s.server.Close(); err == nil {
			err = e
		}
	}
	return err
}

// Join is the start of every rank: rank 0 serves the store (unless a launcher serves it, or
// TESSERA_RDZV names an etcd cluster, whose keys for the job live under <prefix>/<job>/),
// every rank connects to it and announces itself, and Join returns when all env.World ranks
// have come. A rank that does not come within env.Timeout (or ctx's earlier deadline) is
// E_COMM_INIT naming it, on every rank that came; so is a rank number claimed twice and a
// store that cannot be served or reached.
func Join(ctx context.Context, env Env) (*Session, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	timeout := env.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sess := &Session{Env: env}
	if env.ServeStore && env.Rank == 0 {
		srv, err := Serve(ctx, env.ListenAddr())
		if err != nil {
			return nil, errs.Wrap(errs.CommInit, err, "rank 0 of job %s", env.JobID)
		}
		sess.server = srv
	}
	var store Store
	var err error
	if env.IsEtcd() {
		store, err = dialEtcd(ctx, env.StoreAddr, env.JobID)
	} else {
		store, err = Dial(ctx, env.StoreAddr)
	}
	if err != nil {
		if sess.server != nil {
			sess.server.Close()
		}
		if env.ServeStore && env.Rank != 0 {
			return nil, errs.Wrap(errs.CommInit, err, "rank %d of job %s: rank 0 serves the store and did not come (rank 0 missing?)", env.Rank, env.JobID)
		}
		return nil, errs.Wrap(errs.CommInit, err, "rank %d of job %s", env.Rank, env.JobID)
	}
	sess.Store = store
	host, _ := os.Hostname()
	info := fmt.Sprintf("host=%s pid=%d world=%d", host, os.Getpid(), env.World)
	// The world size is part of the barrier's name: a rank started with another WORLD_SIZE
	// meets nobody, and shows up as missing instead of completing a wrong world.
	name := sess.Key("join", "w"+strconv.Itoa(env.World))
	if err := Barrier(ctx, store, name, env.Rank, env.World, info); err != nil {
		store.Close()
		if sess.server != nil {
			// Ranks that came late or with another world size are still to find out who is
			// missing: keep answering them for a moment.
			sess.server.closeWhenIdle(verdictGrace)
		}
		return nil, err
	}
	if cl, ok := store.(interface {
		ClearPrefix(context.Context, string) error
	}); ok && env.Rank == 0 {
		// Every rank is past the barrier: clear it, so that a next run of the same job id
		// within the lease's TTL meets afresh (the TCP store dies with its run).
		cl.ClearPrefix(ctx, name+"/")
	}
	return sess, nil
}
