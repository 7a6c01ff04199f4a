//go:build unix

package cli

import (
	"context"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/shm"
)

// train --transport shm: the ranks are self-launched like tcp's and meet through the same
// store; their frames move through shared-memory rings.
func init() {
	trainJoiners["shm"] = func(ctx context.Context) (dist.Transport, error) { return shm.FromEnv(ctx, 0) }
}
