package cli

// Backends register themselves from init; importing them all here makes every verb, and the
// in-process tests, see the same set as the binary (devices reports why one is unavailable).
import (
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
)
