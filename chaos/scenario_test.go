package chaos

import (
	"testing"
	"time"
)

// The default collective bound grows with the world (3 s per 8 ranks), so 64 goroutine ranks on
// a few cores are not timed out with no fault; a scenario's own bound is kept.
func TestTheDefaultCommTimeoutGrowsWithTheWorld(t *testing.T) {
	for _, c := range []struct {
		world int
		want  time.Duration
	}{{1, 3 * time.Second}, {8, 3 * time.Second}, {9, 6 * time.Second}, {16, 6 * time.Second}, {64, 24 * time.Second}} {
		s := Scenario{World: c.world, Transport: "inproc"}
		if err := s.Normalize(); err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(s.CommTimeout); got != c.want {
			t.Errorf("world %d: default comm timeout %v, want %v", c.world, got, c.want)
		}
	}
	s := Scenario{World: 64, Transport: "inproc", CommTimeout: Duration(time.Second)}
	if err := s.Normalize(); err != nil || time.Duration(s.CommTimeout) != time.Second {
		t.Errorf("a scenario's own bound: %v, %v", s.CommTimeout, err)
	}
}
