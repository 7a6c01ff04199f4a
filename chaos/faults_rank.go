package chaos

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Kill is rank/kill: the rank's process gets SIGKILL right after it applied the step (and
// committed its checkpoint, when one was due): no goodbye, no flush. Its peers must name it
// in E_TIMEOUT_COMM, the launcher restarts the group, every rank resumes from the newest
// committed checkpoint.
type Kill struct{}

func (*Kill) Name() string { return "rank/kill" }
func (*Kill) Site() Site   { return SiteRank }
func (*Kill) Available(r Run) error {
	if r.Containers {
		return unsupported("rank/kill: a container's first process cannot SIGKILL itself (use node/kill)")
	}
	if r.Transport == "inproc" {
		return unsupported("rank/kill: inproc ranks are goroutines, there is no process to kill (use --transport tcp)")
	}
	return nil
}
func (*Kill) Expect(Run) Expect { return Expect{Detect: codes(errs.TimeoutComm), Restart: true} }
func (*Kill) Inject(ctx context.Context, t Target) (string, error) {
	return "", t.Signal(t.Self(), Signal(syscall.SIGKILL))
}

// Hang is rank/hang: the agent stops the rank's process (SIGSTOP) for For, then continues it
// (SIGCONT, deferred). For 0 means until the group restarts. A hang longer than the
// collectives' bound must be detected (E_TIMEOUT_COMM naming the silent rank); a shorter one
// is only a delay the job must tolerate.
type Hang struct {
	For Duration `json:"for,omitempty"`
}

func (*Hang) Name() string { return "rank/hang" }
func (*Hang) Site() Site   { return SiteAgent }
func (*Hang) Available(r Run) error {
	if r.Containers {
		return unsupported("rank/hang: the ranks are containers (use node/pause)")
	}
	if r.Transport == "inproc" {
		return unsupported("rank/hang: inproc ranks are goroutines, there is no process to stop (use --transport tcp)")
	}
	return nil
}
func (h *Hang) Expect(r Run) Expect {
	if h.For == 0 || time.Duration(h.For) > r.CommTimeout {
		return Expect{Detect: codes(errs.TimeoutComm), Restart: true}
	}
	return Expect{}
}
func (h *Hang) Inject(ctx context.Context, t Target) (string, error) {
	if err := t.Signal(t.Rank(), Signal(syscall.SIGSTOP)); err != nil {
		return "", err
	}
	start := time.Now()
	defer t.Signal(t.Rank(), Signal(syscall.SIGCONT))
	if h.For > 0 {
		sleepCtx(ctx, time.Duration(h.For))
	} else {
		<-ctx.Done()
	}
	return fmt.Sprintf("SIGSTOP, SIGCONT after %s", time.Since(start).Round(time.Millisecond)), nil
}

// Slow is rank/slow: for For the agent stops the rank for Pause out of every Period
// (SIGSTOP/SIGCONT), a fail-slow rank the job must tolerate (Pause below the collectives'
// bound) and the straggler watch must name.
type Slow struct {
	For    Duration `json:"for,omitempty"`    // default 2s
	Period Duration `json:"period,omitempty"` // default 8ms: about a cycle a step
	Pause  Duration `json:"pause,omitempty"`  // default 6ms: the rank works at a quarter of its speed
}

func (*Slow) Name() string { return "rank/slow" }
func (*Slow) Site() Site   { return SiteAgent }
func (s *Slow) Available(r Run) error {
	if r.Containers {
		return unsupported("rank/slow: the ranks are containers")
	}
	if r.Transport == "inproc" {
		return unsupported("rank/slow: inproc ranks are goroutines, there is no process to slow (use --transport tcp)")
	}
	return nil
}
func (s *Slow) params() (time.Duration, time.Duration, time.Duration) {
	f, p, q := time.Duration(s.For), time.Duration(s.Period), time.Duration(s.Pause)
	if f <= 0 {
		f = 2 * time.Second
	}
	if p <= 0 {
		p = 8 * time.Millisecond
	}
	if q <= 0 || q > p {
		q = min(6*time.Millisecond, p)
	}
	return f, p, q
}

// A pause within the collectives' bound fails nothing: the agent's straggler watch must
// name the rank (E_STRAGGLER) and the job finish without a restart.
func (s *Slow) Expect(r Run) Expect {
	if _, _, q := s.params(); q > r.CommTimeout {
		return Expect{Detect: codes(errs.TimeoutComm), Restart: true}
	}
	return Expect{Detect: codes(errs.Straggler)}
}
func (s *Slow) Inject(ctx context.Context, t Target) (string, error) {
	f, p, q := s.params()
	end := time.Now().Add(f)
	n := 0
	defer t.Signal(t.Rank(), Signal(syscall.SIGCONT))
	for time.Now().Before(end) && ctx.Err() == nil {
		if err := t.Signal(t.Rank(), Signal(syscall.SIGSTOP)); err != nil {
			return fmt.Sprintf("%d pauses", n), err
		}
		n++
		sleepCtx(ctx, q)
		t.Signal(t.Rank(), Signal(syscall.SIGCONT))
		sleepCtx(ctx, p-q)
	}
	return fmt.Sprintf("%d pauses of %s every %s", n, q, p), nil
}
