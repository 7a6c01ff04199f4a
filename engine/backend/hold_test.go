package backend

import (
	"context"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// fakeMem has capacity bytes; alloc refuses with E_OOM past it.
type fakeMem struct{ capacity, used int64 }

func (m *fakeMem) alloc(n int64) (func() error, error) {
	if m.used+n > m.capacity {
		return nil, errs.New(errs.OOM, "fake: %d bytes, %d of %d used", n, m.used, m.capacity)
	}
	m.used += n
	return func() error { m.used -= n; return nil }, nil
}

func TestTakeUntilOOMFillsToTheFloorAndReleases(t *testing.T) {
	m := &fakeMem{capacity: 3<<20 + 5000}
	h, err := TakeUntilOOM(context.Background(), m.alloc, 1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if errs.CodeOf(h.Refusal) != errs.OOM {
		t.Fatalf("refusal %v, want E_OOM", h.Refusal)
	}
	if left := m.capacity - m.used; left >= 4096 || h.Bytes != m.used {
		t.Fatalf("took %d (used %d), %d bytes left: want less than the 4096-byte floor", h.Bytes, m.used, left)
	}
	if err := h.Release(); err != nil || m.used != 0 || h.Bytes != 0 {
		t.Fatalf("after release: %v, %d bytes still used", err, m.used)
	}
}

func TestTakeUntilOOMStopsOnOtherErrorsAndContext(t *testing.T) {
	m := &fakeMem{capacity: 1 << 30}
	calls := 0
	broken := func(n int64) (func() error, error) {
		if calls++; calls == 3 {
			return nil, errs.New(errs.IllegalAddress, "fake: context lost")
		}
		return m.alloc(n)
	}
	h, err := TakeUntilOOM(context.Background(), broken, 1<<20, 4096)
	if errs.CodeOf(err) != errs.IllegalAddress || h.Blocks != 2 || h.Refusal != nil {
		t.Fatalf("other error: %v, %d blocks, refusal %v", err, h.Blocks, h.Refusal)
	}
	h.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h, err = TakeUntilOOM(ctx, m.alloc, 1<<20, 4096)
	if errs.CodeOf(err) != errs.Timeout || h.Bytes != 0 {
		t.Fatalf("cancelled: %v, %d bytes", err, h.Bytes)
	}
	if _, err := TakeUntilOOM(context.Background(), m.alloc, 1024, 4096); errs.CodeOf(err) != errs.Input {
		t.Fatalf("chunk below floor: %v", err)
	}
}
