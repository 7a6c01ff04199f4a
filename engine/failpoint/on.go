//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Compiled reports whether this binary was built with -tags failpoints. It is true here.
const Compiled = true

// active is the set of faults that are on; nil when none is, so the check at a hook in a
// hot loop is one atomic load.
var active atomic.Pointer[map[string]bool]

// A process started with an unknown name in EnvVar stops at once: running with the misspelt
// fault silently off would report it "not caught" and send someone hunting a gap in the
// suites that does not exist.
func init() {
	v := os.Getenv(EnvVar)
	if v == "" {
		return
	}
	if err := Activate(strings.Split(v, ",")...); err != nil {
		fmt.Fprintf(os.Stderr, "failpoint: %s=%q: %v\n", EnvVar, v, err)
		os.Exit(2)
	}
}

// Enabled reports whether the named fault is on in this process.
func Enabled(name string) bool {
	m := active.Load()
	return m != nil && (*m)[name]
}

// Activate replaces the set of active faults with names (none: every fault off). An unknown
// name is E_INPUT and changes nothing. Hooks read the set without locks, so a program that
// switches faults while the engine runs gets either set at each hook, never a torn one.
func Activate(names ...string) error {
	m := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		known := append(append(append(Names(), GPUNames()...), StressNames()...), JudgeNames()...)
		if !slices.Contains(known, n) {
			return errs.New(errs.Input, "unknown failpoint %q (known: %s)", n, strings.Join(known, ", "))
		}
		m[n] = true
	}
	if len(m) == 0 {
		active.Store(nil)
		return nil
	}
	active.Store(&m)
	return nil
}

// Active lists the faults that are on, sorted.
func Active() []string {
	m := active.Load()
	if m == nil {
		return nil
	}
	var out []string
	for n := range *m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
