//go:build unix && !linux

package shm

import (
	"sync/atomic"
	"time"
)

// Without futexes a waiter polls: a short sleep, ended early when the word changes. Latency is
// worse than on Linux; correctness is the same because every caller re-checks its condition.
func sleepOn(addr *uint32, val uint32, d time.Duration) {
	end := time.Now().Add(d)
	for atomic.LoadUint32(addr) == val && time.Now().Before(end) {
		time.Sleep(50 * time.Microsecond)
	}
}

func wakeOn(*uint32) {}
