//go:build !unix

package autotune

import (
	"runtime"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// lockFile has no cross-process lock to offer here, so writing the cache is refused rather
// than risked; lookups still work.
func lockFile(path string, _ time.Duration) (func(), error) {
	return nil, errs.New(errs.Unsupported, "autotune cache: no file locking on %s (lock %s)", runtime.GOOS, path)
}
