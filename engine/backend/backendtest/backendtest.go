// Package backendtest gives tests a registered backend, or fails them.
package backendtest

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu" // registers "cpu"
)

// CPU is the cpu backend; a test that cannot have it fails.
func CPU(t testing.TB) backend.Backend {
	t.Helper()
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
