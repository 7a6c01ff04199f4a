package training

import (
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/profile"
)

// commClock is the profile.Sink an observed run's step reports to: it adds up the time the
// rank spent in collectives (waiting for its peers included), so that Observe can tell the
// chaos harness how long each step computed, the fail-slow signal (a rank whose compute grows
// while its peers' waits grow). It passes every record on to next, the run's profiler if any.
type commClock struct {
	next profile.Sink
	mu   sync.Mutex
	comm time.Duration
}

func (c *commClock) Launch(l profile.Launch) {
	if c.next != nil {
		c.next.Launch(l)
	}
}

func (c *commClock) Copy(x profile.Copy) {
	if c.next != nil {
		c.next.Copy(x)
	}
}

func (c *commClock) Collective(x profile.Collective) {
	c.mu.Lock()
	c.comm += x.Dur
	c.mu.Unlock()
	if c.next != nil {
		c.next.Collective(x)
	}
}

// lap returns the collective time since the last lap.
func (c *commClock) lap() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.comm
	c.comm = 0
	return d
}
