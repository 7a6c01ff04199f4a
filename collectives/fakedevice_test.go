package collectives

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/dist/devreduce/ptxsim"
)

// fakeNode is a CPU stand-in for one node's GPUs, enough to run engine/dist/cudaipc's real
// DeviceComm with ranks as goroutines: one address space for every rank, streams that run
// each operation at once (so an event is complete as soon as it is recorded, and every fence
// is trivially satisfied), CUDA IPC handles that name a base address (a mapping aliases the
// exporter's bytes), and the devreduce kernels run by ptxsim, the CPU interpreter of their PTX.
// Timing events read the wall clock. (engine/dist/internal/simgpu, the asynchronous
// simulator cudaipc's own tests use, is internal to engine/dist.)
type fakeNode struct {
	mu      sync.Mutex
	regions []*fakeRegion // sorted by base
	next    uint64
	events  map[cuda.Event]*fakeEvent
	nextEv  cuda.Event
	kernels sync.Map // ptx -> *ptxsim.Kernel
	allocs  int      // live allocations (leak check)
}

type fakeRegion struct {
	base  uint64
	data  []byte
	owner int
	gone  bool
}

type fakeEvent struct {
	at    time.Time
	owner int
}

func newFakeNode() *fakeNode {
	return &fakeNode{next: 0x7f0000000000, events: map[cuda.Event]*fakeEvent{}, nextEv: 0x100}
}

// Bytes implements ptxsim.Mem over the node.
func (w *fakeNode) Bytes(addr uint64, size int) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := sort.Search(len(w.regions), func(i int) bool { return w.regions[i].base > addr }) - 1
	if i < 0 || w.regions[i].gone {
		return nil, fmt.Errorf("fake device: address 0x%x is unmapped", addr)
	}
	r := w.regions[i]
	off := addr - r.base
	if off+uint64(size) > uint64(len(r.data)) {
		return nil, fmt.Errorf("fake device: %d bytes at 0x%x run past the %d-byte block at 0x%x", size, addr, len(r.data), r.base)
	}
	return r.data[off : off+uint64(size)], nil
}

func (w *fakeNode) device(rank int) *fakeDevice { return &fakeDevice{w: w, rank: rank} }

// fakeDevice is one rank's GPU on a fakeNode; it implements cudaipc.Device and DeviceMem.
type fakeDevice struct {
	w    *fakeNode
	rank int
}

func (d *fakeDevice) Info() cuda.DeviceInfo {
	return cuda.DeviceInfo{Name: "fake", SMs: 2, CCMajor: 9, MaxThreads: 1024, L2Bytes: 1 << 20}
}

func (d *fakeDevice) Alloc(n int) (uint64, error) {
	w := d.w
	w.mu.Lock()
	defer w.mu.Unlock()
	r := &fakeRegion{base: w.next, data: make([]byte, n), owner: d.rank}
	for i := range r.data {
		r.data[i] = 0xA5 // garbage: nothing reads as a plausible result
	}
	w.next += (uint64(n) + 1<<12 + 255) &^ 255
	w.regions = append(w.regions, r)
	w.allocs++
	return r.base, nil
}

func (d *fakeDevice) Free(p uint64) error {
	w := d.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.regions {
		if r.base == p && !r.gone && r.owner == d.rank {
			r.gone = true
			w.allocs--
			return nil
		}
	}
	return fmt.Errorf("fake rank %d: free of 0x%x, not one of its allocations", d.rank, p)
}

func (d *fakeDevice) CopyAsync(dst, src uint64, n int) error {
	if n == 0 {
		return nil
	}
	to, err := d.w.Bytes(dst, n)
	if err != nil {
		return err
	}
	from, err := d.w.Bytes(src, n)
	if err != nil {
		return err
	}
	copy(to, from)
	return nil
}

func (d *fakeDevice) Upload(ctx context.Context, dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	to, err := d.w.Bytes(dst, len(src))
	if err != nil {
		return err
	}
	copy(to, src)
	return nil
}

func (d *fakeDevice) Download(ctx context.Context, dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	from, err := d.w.Bytes(src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, from)
	return nil
}

func (d *fakeDevice) Launch(ptx, entry string, grid, threads int, args []uint64) error {
	k, ok := d.w.kernels.Load(ptx)
	if !ok {
		kern, err := ptxsim.Parse(ptx)
		if err != nil {
			return fmt.Errorf("fake: %s: %v", entry, err)
		}
		k, _ = d.w.kernels.LoadOrStore(ptx, kern)
	}
	kern := k.(*ptxsim.Kernel)
	if kern.Entry != entry {
		return fmt.Errorf("fake: module has %s, not %s", kern.Entry, entry)
	}
	// A small grid: the kernels' bits do not depend on it (a grid-stride loop).
	return kern.Run(d.w, min(grid, 2), min(threads, 8), args)
}

func (d *fakeDevice) NewEvent(bool) (cuda.Event, error) {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	d.w.nextEv++
	d.w.events[d.w.nextEv] = &fakeEvent{owner: d.rank}
	return d.w.nextEv, nil
}

func (d *fakeDevice) ev(e cuda.Event) (*fakeEvent, error) {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	x, ok := d.w.events[e]
	if !ok {
		return nil, fmt.Errorf("fake rank %d: no event %#x", d.rank, e)
	}
	return x, nil
}

func (d *fakeDevice) DestroyEvent(e cuda.Event) error {
	if _, err := d.ev(e); err != nil {
		return err
	}
	return nil
}

func (d *fakeDevice) Record(e cuda.Event) error {
	x, err := d.ev(e)
	if err != nil {
		return err
	}
	d.w.mu.Lock()
	x.at = time.Now()
	d.w.mu.Unlock()
	return nil
}

func (d *fakeDevice) WaitEvent(e cuda.Event) error { _, err := d.ev(e); return err }
func (d *fakeDevice) Done(e cuda.Event) (bool, error) {
	_, err := d.ev(e)
	return err == nil, err
}
func (d *fakeDevice) WaitDone(ctx context.Context, e cuda.Event, what string) error {
	_, err := d.ev(e)
	return err
}

func (d *fakeDevice) Elapsed(start, end cuda.Event) (float64, error) {
	a, err := d.ev(start)
	if err != nil {
		return 0, err
	}
	b, err := d.ev(end)
	if err != nil {
		return 0, err
	}
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	return float64(b.at.Sub(a.at).Nanoseconds()) / 1e6, nil
}

func (d *fakeDevice) ExportMem(p uint64) (cuda.IPCMemHandle, error) {
	var h cuda.IPCMemHandle
	binary.LittleEndian.PutUint64(h.Reserved[:], p)
	return h, nil
}

// ImportMem maps the exporter's block: here the same address (one address space).
func (d *fakeDevice) ImportMem(h cuda.IPCMemHandle) (uint64, error) {
	p := binary.LittleEndian.Uint64(h.Reserved[:])
	if _, err := d.w.Bytes(p, 0); err != nil {
		return 0, err
	}
	return p, nil
}

func (d *fakeDevice) CloseMem(uint64) error { return nil }

func (d *fakeDevice) ExportEvent(e cuda.Event) (cuda.IPCEventHandle, error) {
	var h cuda.IPCEventHandle
	binary.LittleEndian.PutUint64(h.Reserved[:], uint64(e))
	return h, nil
}

func (d *fakeDevice) ImportEvent(h cuda.IPCEventHandle) (cuda.Event, error) {
	e := cuda.Event(binary.LittleEndian.Uint64(h.Reserved[:]))
	_, err := d.ev(e)
	return e, err
}
