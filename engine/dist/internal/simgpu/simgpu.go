// Package simgpu is a simulated node of CUDA devices for the device transports' tests
// (engine/dist/cudaipc, engine/dist/nccl): ranks are goroutines standing for processes, and
// each has a Device with an asynchronous stream, events and CUDA IPC.
package simgpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/dist/devreduce/ptxsim"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Node is a simulated node: one address space shared by every simulated process (rank),
// with CUDA's IPC rules enforced. Each rank's device has an asynchronous stream (a goroutine
// running queued work after random delays), events with CUDA's capture semantics
// (cuStreamWaitEvent waits for the record current at the time of the call), and IPC
// mappings that are aliases of the exporter's bytes. What CUDA leaves undefined (freeing a
// block a peer still maps, destroying an event a peer still holds, overlapping copies) is
// recorded as a violation. A missing fence shows as wrong bits or, under -race, as a data race
// between two ranks' streams.
type Node struct {
	mu         sync.Mutex
	regions    []*region // sorted by base
	next       uint64
	events     map[cuda.Event]*eventRef
	nextEvent  cuda.Event
	violations []string
	maxDelay   time.Duration
	// LateCapture makes a stream wait for the event's latest record when the wait runs, not
	// when it was enqueued: the weaker reading of interprocess events a protocol must survive.
	LateCapture bool
	kernels     sync.Map // ptx -> *ptxsim.Kernel
	launches    int
}

type region struct {
	base    uint64
	data    []byte
	rank    int
	alias   *region // for an IPC mapping: the exporter's region
	aliases int     // open mappings of this region
	gone    bool
	nonce   uint64
}

type event struct {
	mu                  sync.Mutex
	cond                *sync.Cond
	recorded, completed uint64
	ipc                 bool
	rank                int
	imports             int
	destroyed           bool
}

type eventRef struct {
	ev       *event
	rank     int // the process holding this handle
	imported bool
}

// NewNode returns an empty node; every stream operation waits a random time up to maxDelay
// before it runs (0: none), which reorders the ranks' device work.
func NewNode(maxDelay time.Duration) *Node {
	return &Node{next: 0x7f0000000000, events: map[cuda.Event]*eventRef{}, nextEvent: 0x1000, maxDelay: maxDelay}
}

func (w *Node) violate(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

func (w *Node) Violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.violations...)
}

// live lists regions not yet freed or closed (a leak check).
func (w *Node) Live() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.regions {
		if !r.gone {
			out = append(out, fmt.Sprintf("rank %d 0x%x (%d bytes, mapping=%v)", r.rank, r.base, len(r.data), r.alias != nil))
		}
	}
	for id, e := range w.events {
		if !e.ev.destroyed || e.imported {
			out = append(out, fmt.Sprintf("rank %d event %#x (imported=%v)", e.rank, id, e.imported))
		}
	}
	return out
}

func (w *Node) addRegion(r *region) uint64 {
	r.base = w.next
	w.next += (uint64(len(r.data)) + 1<<16 + 255) &^ 255
	w.regions = append(w.regions, r)
	sort.Slice(w.regions, func(i, j int) bool { return w.regions[i].base < w.regions[j].base })
	return r.base
}

// Bytes implements ptxsim.Mem over the whole node (rank checks are the devices' job).
func (w *Node) Bytes(addr uint64, size int) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := sort.Search(len(w.regions), func(i int) bool { return w.regions[i].base > addr }) - 1
	if i < 0 {
		return nil, fmt.Errorf("address 0x%x is unmapped", addr)
	}
	r := w.regions[i]
	if r.gone {
		return nil, fmt.Errorf("address 0x%x is in a freed or closed region (0x%x)", addr, r.base)
	}
	off := addr - r.base
	if off+uint64(size) > uint64(len(r.data)) {
		return nil, fmt.Errorf("%d bytes at 0x%x pass the end of the %d-byte region at 0x%x", size, addr, len(r.data), r.base)
	}
	if r.alias != nil && r.alias.gone {
		return nil, fmt.Errorf("address 0x%x maps a block its owner freed", addr)
	}
	return r.data[off : off+uint64(size)], nil
}

// Device is one rank's simulated GPU.
type Device struct {
	w    *Node
	rank int

	work chan func() error
	mu   sync.Mutex
	err  error // sticky stream fault
	rng  *rand.Rand

	opened map[uint64]bool // exporter bases this process has mapped
}

func (w *Node) NewDevice(rank int, seed uint64) *Device {
	d := &Device{w: w, rank: rank, work: make(chan func() error, 1<<16), rng: rand.New(rand.NewPCG(seed, uint64(rank))), opened: map[uint64]bool{}}
	go d.stream()
	return d
}

func (d *Device) stream() {
	for f := range d.work {
		d.mu.Lock()
		failed := d.err != nil
		delay := time.Duration(0)
		if d.w.maxDelay > 0 && d.rng.IntN(3) == 0 {
			delay = time.Duration(d.rng.Int64N(int64(d.w.maxDelay)))
		}
		d.mu.Unlock()
		if delay > 0 {
			time.Sleep(delay)
		}
		if failed {
			continue
		}
		if err := f(); err != nil {
			d.mu.Lock()
			if d.err == nil {
				d.err = err
			}
			d.mu.Unlock()
		}
	}
}

// Stop ends the device's stream goroutine (after the test).
func (d *Device) Stop() { close(d.work) }

// Rank is the simulated process this device belongs to.
func (d *Device) Rank() int { return d.rank }

// Enqueue appends f to the stream: it runs after everything enqueued before it. An error
// from f is a sticky device fault, as a kernel fault is.
func (d *Device) Enqueue(f func() error) error { return d.enqueue(f) }

// Do runs f now, on the calling goroutine (a real device runs it on its owner thread).
func (d *Device) Do(f func() error) error { return f() }

// Stream is a stand-in stream handle.
func (d *Device) Stream() uintptr { return uintptr(0x5000 + d.rank) }

// Node is the node the device belongs to (its address space).
func (d *Device) Node() *Node { return d.w }

func (d *Device) fault() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

func (d *Device) enqueue(f func() error) error {
	if err := d.fault(); err != nil {
		return err
	}
	d.work <- f
	return nil
}

func (d *Device) Info() cuda.DeviceInfo {
	return cuda.DeviceInfo{Name: "simulated", SMs: 2, CCMajor: 9, MaxThreads: 1024}
}

func (d *Device) Alloc(n int) (uint64, error) {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	r := &region{data: make([]byte, max(n, 1)), rank: d.rank, nonce: rand.Uint64()}
	for i := range r.data {
		r.data[i] = 0xFF // poison: a byte nobody wrote reads as NaN / -1
	}
	r.data = r.data[:n]
	return d.w.addRegion(r), nil
}

func (d *Device) region(p uint64) *region {
	for _, r := range d.w.regions {
		if r.base == p && !r.gone {
			return r
		}
	}
	return nil
}

func (d *Device) Free(p uint64) error {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	r := d.region(p)
	if r == nil || r.rank != d.rank || r.alias != nil {
		return fmt.Errorf("sim rank %d: free of 0x%x, not one of its allocations", d.rank, p)
	}
	if r.aliases > 0 {
		d.w.violations = append(d.w.violations, fmt.Sprintf("rank %d freed 0x%x while %d peer mapping(s) were open", d.rank, p, r.aliases))
	}
	r.gone = true
	return nil
}

func (d *Device) CopyAsync(dst, src uint64, n int) error {
	if n == 0 {
		return nil
	}
	return d.enqueue(func() error {
		to, err := d.w.Bytes(dst, n)
		if err != nil {
			return fmt.Errorf("sim rank %d: copy to: %v", d.rank, err)
		}
		from, err := d.w.Bytes(src, n)
		if err != nil {
			return fmt.Errorf("sim rank %d: copy from: %v", d.rank, err)
		}
		if overlapping(to, from) {
			d.w.violate("rank %d: overlapping copy 0x%x <- 0x%x (%d bytes)", d.rank, dst, src, n)
		}
		copy(to, from)
		return nil
	})
}

func overlapping(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := &a[0], &b[0]
	return pa == pb || (addrOf(pa) < addrOf(pb)+uintptr(len(b)) && addrOf(pb) < addrOf(pa)+uintptr(len(a)))
}

func addrOf(p *byte) uintptr { return uintptr(unsafe.Pointer(p)) }

func (d *Device) sync(ctx context.Context) error {
	done := make(chan struct{})
	if err := d.enqueue(func() error { close(done); return nil }); err != nil {
		return err
	}
	select {
	case <-done:
		return d.fault()
	case <-ctx.Done():
		if err := d.fault(); err != nil {
			return err
		}
		return errs.New(errs.Timeout, "sim rank %d: stream not drained", d.rank)
	}
}

func (d *Device) Upload(ctx context.Context, dst uint64, src []byte) error {
	c := append([]byte(nil), src...)
	if err := d.enqueue(func() error {
		to, err := d.w.Bytes(dst, len(c))
		if err != nil {
			return err
		}
		copy(to, c)
		return nil
	}); err != nil {
		return err
	}
	return d.sync(ctx)
}

func (d *Device) Download(ctx context.Context, dst []byte, src uint64) error {
	var got []byte
	if err := d.enqueue(func() error {
		from, err := d.w.Bytes(src, len(dst))
		if err != nil {
			return err
		}
		got = append([]byte(nil), from...)
		return nil
	}); err != nil {
		return err
	}
	if err := d.sync(ctx); err != nil {
		return err
	}
	copy(dst, got)
	return nil
}

func (d *Device) Launch(ptx, entry string, grid, threads int, args []uint64) error {
	k, ok := d.w.kernels.Load(ptx)
	if !ok {
		kern, err := ptxsim.Parse(ptx)
		if err != nil {
			return fmt.Errorf("sim: %s: %v", entry, err)
		}
		k, _ = d.w.kernels.LoadOrStore(ptx, kern)
	}
	kern := k.(*ptxsim.Kernel)
	if kern.Entry != entry {
		return fmt.Errorf("sim: module has %s, not %s", kern.Entry, entry)
	}
	d.w.mu.Lock()
	d.w.launches++
	d.w.mu.Unlock()
	// A small grid: the kernels' bits do not depend on it, and the grid-stride loop wraps.
	return d.enqueue(func() error { return kern.Run(d.w, min(grid, 2), min(threads, 8), args) })
}

func (d *Device) newEventID(ev *event, imported bool) cuda.Event {
	d.w.nextEvent++
	id := d.w.nextEvent
	d.w.events[id] = &eventRef{ev: ev, rank: d.rank, imported: imported}
	return id
}

func (d *Device) event(e cuda.Event) (*eventRef, error) {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	r, ok := d.w.events[e]
	if !ok || r.rank != d.rank || (r.ev.destroyed && !r.imported) {
		return nil, fmt.Errorf("sim rank %d: event %#x is not this process's", d.rank, e)
	}
	return r, nil
}

func (d *Device) NewEvent(ipc bool) (cuda.Event, error) {
	ev := &event{ipc: ipc, rank: d.rank}
	ev.cond = sync.NewCond(&ev.mu)
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	return d.newEventID(ev, false), nil
}

func (d *Device) DestroyEvent(e cuda.Event) error {
	r, err := d.event(e)
	if err != nil {
		return err
	}
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	if r.imported {
		r.ev.imports--
		delete(d.w.events, e)
		return nil
	}
	if r.ev.imports > 0 {
		d.w.violations = append(d.w.violations, fmt.Sprintf("rank %d destroyed an event %d peer(s) still hold", d.rank, r.ev.imports))
	}
	r.ev.destroyed = true
	return nil
}

func (d *Device) Record(e cuda.Event) error {
	r, err := d.event(e)
	if err != nil {
		return err
	}
	if r.imported {
		return fmt.Errorf("sim rank %d: record on an imported event", d.rank)
	}
	ev := r.ev
	ev.mu.Lock()
	ev.recorded++
	target := ev.recorded
	ev.mu.Unlock()
	return d.enqueue(func() error {
		ev.mu.Lock()
		if target > ev.completed {
			ev.completed = target
		}
		ev.cond.Broadcast()
		ev.mu.Unlock()
		return nil
	})
}

// WaitEvent captures the record current now, as cuStreamWaitEvent does.
func (d *Device) WaitEvent(e cuda.Event) error {
	r, err := d.event(e)
	if err != nil {
		return err
	}
	ev := r.ev
	ev.mu.Lock()
	target := ev.recorded
	ev.mu.Unlock()
	late := d.w.LateCapture
	return d.enqueue(func() error {
		if late {
			ev.mu.Lock()
			target = ev.recorded
			ev.mu.Unlock()
		}
		deadline := time.Now().Add(10 * time.Second)
		stop := make(chan struct{})
		defer close(stop)
		go func() { // wake the wait below at the deadline
			select {
			case <-stop:
			case <-time.After(time.Until(deadline)):
				ev.mu.Lock()
				ev.cond.Broadcast()
				ev.mu.Unlock()
			}
		}()
		ev.mu.Lock()
		defer ev.mu.Unlock()
		for ev.completed < target {
			if time.Now().After(deadline) {
				return fmt.Errorf("sim rank %d: stream waited 10s for rank %d's event: device deadlock", d.rank, ev.rank)
			}
			ev.cond.Wait()
		}
		return nil
	})
}

func (d *Device) Done(e cuda.Event) (bool, error) {
	r, err := d.event(e)
	if err != nil {
		return false, err
	}
	if err := d.fault(); err != nil {
		return false, err
	}
	r.ev.mu.Lock()
	defer r.ev.mu.Unlock()
	return r.ev.completed >= r.ev.recorded, nil
}

func (d *Device) WaitDone(ctx context.Context, e cuda.Event, what string) error {
	for {
		ok, err := d.Done(e)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return errs.New(errs.Timeout, "sim rank %d: %s not finished", d.rank, what)
		case <-time.After(50 * time.Microsecond):
		}
	}
}

func (d *Device) Elapsed(start, end cuda.Event) (float64, error) { return 0, nil }

func (d *Device) ExportMem(p uint64) (cuda.IPCMemHandle, error) {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	r := d.region(p)
	if r == nil || r.rank != d.rank || r.alias != nil {
		return cuda.IPCMemHandle{}, fmt.Errorf("sim rank %d: cuIpcGetMemHandle(0x%x): not the base of an allocation", d.rank, p)
	}
	var h cuda.IPCMemHandle
	binary.LittleEndian.PutUint64(h.Reserved[0:], r.base)
	binary.LittleEndian.PutUint64(h.Reserved[8:], r.nonce)
	return h, nil
}

func (d *Device) ImportMem(h cuda.IPCMemHandle) (uint64, error) {
	base, nonce := binary.LittleEndian.Uint64(h.Reserved[0:]), binary.LittleEndian.Uint64(h.Reserved[8:])
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	r := d.region(base)
	switch {
	case r == nil || r.nonce != nonce || r.alias != nil:
		return 0, fmt.Errorf("sim rank %d: cuIpcOpenMemHandle: stale or invalid handle", d.rank)
	case r.rank == d.rank:
		return 0, fmt.Errorf("sim rank %d: cuIpcOpenMemHandle of its own allocation", d.rank)
	case d.opened[base]:
		return 0, fmt.Errorf("sim rank %d: cuIpcOpenMemHandle: 0x%x already mapped in this process", d.rank, base)
	}
	d.opened[base] = true
	r.aliases++
	return d.w.addRegion(&region{data: r.data, rank: d.rank, alias: r}), nil
}

func (d *Device) CloseMem(p uint64) error {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	r := d.region(p)
	if r == nil || r.rank != d.rank || r.alias == nil {
		return fmt.Errorf("sim rank %d: cuIpcCloseMemHandle(0x%x): not a mapping", d.rank, p)
	}
	r.gone = true
	r.alias.aliases--
	delete(d.opened, r.alias.base)
	return nil
}

func (d *Device) ExportEvent(e cuda.Event) (cuda.IPCEventHandle, error) {
	r, err := d.event(e)
	if err != nil {
		return cuda.IPCEventHandle{}, err
	}
	if !r.ev.ipc {
		return cuda.IPCEventHandle{}, fmt.Errorf("sim rank %d: cuIpcGetEventHandle of an event without CU_EVENT_INTERPROCESS", d.rank)
	}
	var h cuda.IPCEventHandle
	binary.LittleEndian.PutUint64(h.Reserved[:], uint64(e))
	return h, nil
}

func (d *Device) ImportEvent(h cuda.IPCEventHandle) (cuda.Event, error) {
	id := cuda.Event(binary.LittleEndian.Uint64(h.Reserved[:]))
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	r, ok := d.w.events[id]
	if !ok || r.imported || r.ev.destroyed {
		return 0, fmt.Errorf("sim rank %d: cuIpcOpenEventHandle: invalid handle", d.rank)
	}
	if r.rank == d.rank {
		return 0, fmt.Errorf("sim rank %d: cuIpcOpenEventHandle of its own event", d.rank)
	}
	r.ev.imports++
	return d.newEventID(r.ev, true), nil
}
