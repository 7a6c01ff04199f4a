package backend

import (
	"context"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Hold is memory taken until the allocator refused: what the chaos fault device/oom and the
// stress runner's memory hog do to a backend's memory (device memory on a GPU, the CPU
// backend's budget on the host), through the engine's own allocation calls, so the refusal
// they see is the engine's coded E_OOM.
type Hold struct {
	Bytes   int64 // taken
	Blocks  int
	Refusal error // the E_OOM that ended the taking; nil when ctx ended it first
	frees   []func() error
}

// TakeUntilOOM allocates blocks of chunk bytes with alloc, halving the size after each E_OOM,
// until even floor bytes are refused: then the memory is as full as blocks of floor bytes can
// make it. Halving matters: a device with 1.5 GiB left refuses a 1 GiB block once, and a small
// workload's whole step fits in what a coarse floor leaves. An error other than E_OOM, or ctx
// ending, stops the taking early and is returned with what was taken so far (release it).
func TakeUntilOOM(ctx context.Context, alloc func(n int64) (free func() error, err error), chunk, floor int64) (*Hold, error) {
	if chunk < floor || floor < 1 {
		return &Hold{}, errs.New(errs.Input, "take until E_OOM: chunk %d smaller than floor %d, or floor < 1", chunk, floor)
	}
	h := &Hold{}
	for chunk >= floor {
		if err := ctx.Err(); err != nil {
			return h, errs.New(errs.Timeout, "take until E_OOM: stopped after %d bytes in %d blocks, before the allocator refused: %v", h.Bytes, h.Blocks, err)
		}
		free, err := alloc(chunk)
		switch {
		case err == nil:
			h.Bytes += chunk
			h.Blocks++
			h.frees = append(h.frees, free)
		case errs.CodeOf(err) == errs.OOM:
			h.Refusal = err
			chunk /= 2
		default:
			return h, err
		}
	}
	return h, nil
}

// Release frees every block (the last taken first) and reports the first error.
func (h *Hold) Release() error {
	var first error
	for i := len(h.frees) - 1; i >= 0; i-- {
		if err := h.frees[i](); err != nil && first == nil {
			first = err
		}
	}
	h.frees, h.Bytes, h.Blocks = nil, 0, 0
	return first
}
