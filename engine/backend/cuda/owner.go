package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// owner is the one goroutine that talks to a device. It locks itself to an OS thread, makes the
// device's primary context current there, and runs every closure sent to it on that thread.
// The driver binds the current context to the calling thread, and Go moves goroutines between
// threads freely: without this, calls from other goroutines saw CUDA_ERROR_INVALID_CONTEXT
// (design.md §5). Everything that touches the device (memory, modules, launches, events) goes
// through do, which also serialises concurrent users of the device.
type owner struct {
	a    *api
	info DeviceInfo // for a partition, SMs is the partition's
	at   Placement
	work chan func()

	brokenMu sync.Mutex
	broken   error // the sticky fault that made the context unusable, if any

	// Owned by the owner thread (touched only inside do):
	dev    int32
	ctx    uintptr
	green  uintptr // CUgreenCtx of a partition, else 0
	stream uintptr
	mem    *allocator
	mods   *moduleTable
}

// Placement says where on a device a backend's work runs. The zero value is the whole device
// on its one shared stream.
type Placement struct {
	// Lane > 0 gives the backend an owner of its own: its own OS thread, non-blocking stream,
	// caching allocator and loaded modules in the device's primary context, so kernels of
	// different lanes run concurrently (stress's streams mode). Lane 0 is the shared owner.
	Lane int
	// SMs > 0 runs the backend in a green context of that many SMs (a multiple of
	// SMGranularity) split off the device: an SM partition (mig/green, issue 12). 0 is every SM.
	SMs int
}

func (p Placement) String() string {
	s := ""
	if p.SMs > 0 {
		s += fmt.Sprintf(" partition %d SMs", p.SMs)
	}
	if p.Lane > 0 {
		s += fmt.Sprintf(" lane %d", p.Lane)
	}
	return s
}

type ownerKey struct {
	ordinal int
	at      Placement
}

var (
	ownersMu sync.Mutex
	owners   = map[ownerKey]*owner{}
)

// ownerFor returns the owner of device ordinal at placement at, starting it on first use.
// The SM count in the returned owner's info is the one the driver granted.
func ownerFor(a *api, info DeviceInfo, at Placement) (*owner, error) {
	ownersMu.Lock()
	defer ownersMu.Unlock()
	k := ownerKey{info.Ordinal, at}
	if o, ok := owners[k]; ok {
		return o, nil
	}
	o := &owner{a: a, info: info, at: at, work: make(chan func())}
	ready := make(chan error)
	go o.loop(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	owners[k] = o
	return o, nil
}

// loop never returns: the context lives as long as the process, and so does its thread.
// A failed open ends it (nothing was registered).
func (o *owner) loop(ready chan<- error) {
	runtime.LockOSThread()
	if err := o.open(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for f := range o.work {
		f()
	}
}

// open makes the owner's context current on its thread and creates the stream all its work
// runs on. The whole device retains the primary context (shared with any other user of the
// driver in this process, unlike cuCtxCreate); lane 0 keeps a blocking stream, ordered with
// the legacy stream that others may use; other lanes get non-blocking ones, so they do not
// wait for each other. Every copy of the execution path is ordered on the owner's stream
// (memory.go). A partition makes a green context instead (openGreen).
func (o *owner) open() error {
	a, name := o.a, o.info.Name
	if err := a.check(a.cuDeviceGet(&o.dev, int32(o.info.Ordinal)), "device %d (%s): cuDeviceGet", o.info.Ordinal, name); err != nil {
		return err
	}
	if o.at.SMs > 0 {
		got, err := o.openGreen(o.at.SMs)
		if err != nil {
			return err
		}
		o.info.SMs = got
	} else {
		if err := a.check(a.cuDevicePrimaryCtxRetain(&o.ctx, o.dev), "device %d (%s): cuDevicePrimaryCtxRetain", o.info.Ordinal, name); err != nil {
			return err
		}
		if err := a.check(a.cuCtxSetCurrent(o.ctx), "device %d (%s): cuCtxSetCurrent", o.info.Ordinal, name); err != nil {
			return err
		}
		flags := uint32(0)
		if o.at.Lane > 0 {
			flags = StreamNonBlocking
		}
		if err := a.check(a.cuStreamCreate(&o.stream, flags), "%s: cuStreamCreate", o.where()); err != nil {
			return err
		}
	}
	o.mem = newAllocator(&driverMem{a: a, where: o.where(), stream: o.stream})
	o.mods = newModuleTable()
	return nil
}

// where names the device (and the placement) in error messages.
func (o *owner) where() string {
	return fmt.Sprintf("cuda:%d %s%s", o.info.Ordinal, o.info.Name, o.at)
}

// do runs f on the owner thread and returns its error. A panic inside f becomes E_INTERNAL
// instead of killing the process. After a sticky fault (illegal address, ...) the context is
// dead; do then refuses new work with that fault, so callers get the cause, not a cascade.
func (o *owner) do(f func() error) error {
	done := make(chan error, 1)
	o.work <- func() {
		defer func() {
			if r := recover(); r != nil {
				done <- errs.New(errs.Internal, "%s: panic on the device thread: %v", o.where(), r)
			}
		}()
		if err := o.unusable(); err != nil {
			done <- err
			return
		}
		err := f()
		var re *resultError
		if errors.As(err, &re) && sticky(re.Result) {
			o.brokenMu.Lock()
			o.broken = err
			o.brokenMu.Unlock()
		}
		done <- err
	}
	return <-done
}

// unusable returns an error carrying the sticky fault's code once the context is dead.
func (o *owner) unusable() error {
	o.brokenMu.Lock()
	defer o.brokenMu.Unlock()
	if o.broken == nil {
		return nil
	}
	return errs.Wrap(errs.Internal, o.broken, "%s: context unusable after an earlier fault (restart the process)", o.where())
}
