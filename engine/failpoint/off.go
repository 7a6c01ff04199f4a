//go:build !failpoints

package failpoint

import "github.com/tessera-qa/tessera-qa/engine/errs"

// Compiled reports whether this binary was built with -tags failpoints. It is false here.
const Compiled = false

// Enabled is constant false without -tags failpoints: hooks compile to the correct code only.
func Enabled(string) bool { return false }

// Activate refuses every fault in a normal build. Activating nothing succeeds: nothing is on.
func Activate(names ...string) error {
	if len(names) == 0 {
		return nil
	}
	return errs.New(errs.Unsupported, "failpoint %q: this binary was built without -tags failpoints, so it contains no faults", names[0])
}

// Active is always empty in a normal build, whatever EnvVar says.
func Active() []string { return nil }
