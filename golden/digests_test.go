package golden

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func childDigests() DigestSet {
	return ComputeDigests(SpecsFor("add", numerics.F32), []backend.Backend{
		&fakeBackend{name: "exact"},
		&fakeBackend{name: "gpu", avail: errs.New(errs.NoDevice, "none")},
	})
}

// TestMain makes this test binary a digest child when asked, as the determinism suite's is.
func TestMain(m *testing.M) {
	if os.Getenv(DigestChildEnv) == "1" {
		if err := PrintDigests(os.Stdout, childDigests()); err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestDigestsFromChild(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip("no executable path:", err)
	}
	child, err := DigestsFromChild(time.Minute, exe)
	if err != nil {
		t.Fatal(err)
	}
	here := childDigests()
	if len(here.Digests) != len(SpecsFor("add", numerics.F32)) || len(here.Errors) != 0 {
		t.Fatalf("digests for %d keys, errors %v (the unavailable backend must be left out)", len(here.Digests), here.Errors)
	}
	if !maps.EqualFunc(child.Digests, here.Digests, slices.Equal) {
		t.Errorf("child digests differ from this process's")
	}
	if _, err := DigestsFromChild(time.Minute, "/bin/true"); err == nil || !strings.Contains(err.Error(), "printed no") {
		t.Errorf("a child that prints nothing: %v", err)
	}
}
