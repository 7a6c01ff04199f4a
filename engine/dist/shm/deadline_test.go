package shm

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/internal/testdeadline"
)

// TestMain bounds the package's tests: past the limit they end with every goroutine's stack.
func TestMain(m *testing.M) { testdeadline.Main(m) }
