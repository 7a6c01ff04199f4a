package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
)

// Tap is a rank's hook on its real outgoing frames (dist.Intercept): faults arm rules on it,
// each rule acts on the frames it matches until it has acted on as many as it was armed for.
// Frames nobody matches go out untouched.
type Tap struct {
	mu    sync.Mutex
	rules []*rule
	// plant is a deliberately planted bug ("accept-bad-checksum": corruptions keep a valid
	// checksum, as a receiver that does not check would see them), for the checker's tests.
	plant string
}

type rule struct {
	match func(to int, f *dist.Frame) bool
	act   func(ctx context.Context, to int, f *dist.Frame) []*dist.Frame
	left  int // frames still to act on; < 0: no limit
	hit   chan struct{}
	once  sync.Once
	what  string // the first frame acted on
}

// NewTap returns an empty tap (plant: see Tap).
func NewTap(plant string) *Tap { return &Tap{plant: plant} }

// Wrap returns t with the tap on its outgoing frames.
func (tp *Tap) Wrap(t dist.Transport) dist.Transport { return dist.Intercept(t, tp.hook) }

func (tp *Tap) hook(ctx context.Context, to int, f *dist.Frame) []*dist.Frame {
	tp.mu.Lock()
	var r *rule
	for _, x := range tp.rules {
		if x.left != 0 && x.match(to, f) {
			r = x
			if r.left > 0 {
				r.left--
			}
			break
		}
	}
	tp.mu.Unlock()
	if r == nil {
		return []*dist.Frame{f}
	}
	r.once.Do(func() {
		r.what = fmt.Sprintf("%s to rank %d", f.Header, to)
		close(r.hit)
	})
	return r.act(ctx, to, f)
}

// arm adds a rule for n frames (n < 0: every matching frame) and returns a function that
// removes it.
func (tp *Tap) arm(n int, match func(int, *dist.Frame) bool, act func(context.Context, int, *dist.Frame) []*dist.Frame) (*rule, func()) {
	r := &rule{match: match, act: act, left: n, hit: make(chan struct{})}
	tp.mu.Lock()
	tp.rules = append(tp.rules, r)
	tp.mu.Unlock()
	return r, func() {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		for i, x := range tp.rules {
			if x == r {
				tp.rules = append(tp.rules[:i], tp.rules[i+1:]...)
				return
			}
		}
	}
}

// armOnce arms a rule for one frame, waits until it acted (bounded by ctx and limit), and
// disarms it. It returns a description of the frame it acted on.
func (tp *Tap) armOnce(ctx context.Context, limit time.Duration, match func(int, *dist.Frame) bool, act func(context.Context, int, *dist.Frame) []*dist.Frame) (string, error) {
	r, disarm := tp.arm(1, match, act)
	defer disarm()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-r.hit:
		return r.what, nil
	case <-t.C:
		return "", fmt.Errorf("no frame to act on within %s", limit)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// dataFrame matches the frames of collectives (not the abort frames a failing rank sends).
func dataFrame(peer int) func(int, *dist.Frame) bool {
	return func(to int, f *dist.Frame) bool {
		return f.Op != dist.OpAbort && len(f.Payload) > 0 && (peer < 0 || to == peer)
	}
}

// armed is the number of rules armed now.
func (tp *Tap) armed() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.rules)
}
