package collectives

import (
	"context"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// RunInproc runs cfg on a world of n ranks living in this process as goroutines (the inproc
// transport) and returns the rows. When ranks fail, the error is the most specific one:
// a rank's own failure (E_DESYNC, E_INPUT, ...) before the E_TIMEOUT_COMM of the peers that
// lost it. It returns only once every rank has returned.
func RunInproc(ctx context.Context, n int, cfg Config) ([]Row, error) {
	if n < 1 || n > MaxInprocWorld {
		return nil, errs.New(errs.Input, "collectives: in-process world of %d ranks (want 1..%d)", n, MaxInprocWorld)
	}
	ts := dist.NewInproc(n)
	rows := make([][]Row, n)
	fails := make([]error, n)
	var wg sync.WaitGroup
	for r := range ts {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			// Closing the endpoint tells the peers at once that this rank is gone.
			defer ts[r].Close()
			rc := cfg
			if r != 0 {
				rc.Progress = nil
			}
			rows[r], fails[r] = RunRank(ctx, NewComm(ts[r], rc), rc)
		}(r)
	}
	wg.Wait()
	if err := firstFailure(fails); err != nil {
		return nil, err
	}
	return rows[0], nil
}

// MaxInprocWorld bounds in-process worlds (goroutines holding their buffers).
const MaxInprocWorld = 256

// firstFailure picks the error that explains a failed world: the first rank's error that is
// not a consequence of another rank's (E_TIMEOUT_COMM), else the first error.
func firstFailure(es []error) error {
	var first error
	for _, e := range es {
		if e == nil {
			continue
		}
		if errs.CodeOf(e) != errs.TimeoutComm {
			return e
		}
		if first == nil {
			first = e
		}
	}
	return first
}
