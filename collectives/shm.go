//go:build unix

package collectives

import (
	"context"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/shm"
)

// The shm transport: the ranks are processes of one machine, self-launched like tcp's, and
// meet through the same store; frames move through shared-memory rings instead of sockets.
func init() {
	RegisterTransport("shm", func(ctx context.Context, timeout time.Duration) (dist.Transport, error) {
		t, err := shm.FromEnv(ctx, timeout)
		if err != nil {
			return nil, err
		}
		return t, nil
	})
}
