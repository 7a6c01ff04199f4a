//go:build unix

package autotune

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// lockFile takes an exclusive flock on path (created if missing) and returns its release.
// The lock file itself is never deleted: removing it while another process waits on the old
// inode would let two processes hold "the" lock at once. flock locks die with their process,
// so a crashed writer never leaves the cache locked.
func lockFile(path string, timeout time.Duration) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "autotune cache: open lock %s", path)
	}
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, errs.Wrap(errs.Input, err, "autotune cache: flock %s", path)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, errs.New(errs.Timeout, "autotune cache: lock %s still held by another process after %v", path, timeout)
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}
