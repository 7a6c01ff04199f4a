// Package version names the engine build: a semantic version bumped by hand when the engine's
// observable behaviour changes, and the source commit it was built from.
package version

import (
	"context"
	"os/exec"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Version is the engine's semantic version.
const Version = "0.1.0"

var commit = sync.OnceValue(findCommit)

// Commit returns the source revision of this build: the VCS stamp of the binary when Go
// recorded one, else `git rev-parse --short HEAD` in the working directory (builds here use
// -buildvcs=false, and tests run inside the checkout), else "unknown". A "-dirty" suffix marks
// a stamped build from a modified tree. The answer is computed once per process.
func Commit() string { return commit() }

func findCommit() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev string
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if dirty {
				rev += "-dirty"
			}
			return rev
		}
	}
	// git may be missing or slow (network file systems); a report never waits on it long.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err == nil {
		if s := strings.TrimSpace(string(out)); s != "" && !strings.ContainsAny(s, " \n") {
			return s
		}
	}
	return "unknown"
}
