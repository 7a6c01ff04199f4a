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
	info DeviceInfo
	work chan func()

	brokenMu sync.Mutex
	broken   error // the sticky fault that made the context unusable, if any

	// Owned by the owner thread (touched only inside do):
	dev    int32
	ctx    uintptr
	stream uintptr
	mem    *allocator
	mods   *moduleTable
}

var (
	ownersMu sync.Mutex
	owners   = map[int]*owner{}
)

// ownerFor returns the owner of device ordinal, starting it on first use.
func ownerFor(a *api, info DeviceInfo) (*owner, error) {
	ownersMu.Lock()
	defer ownersMu.Unlock()
	if o, ok := owners[info.Ordinal]; ok {
		return o, nil
	}
	o := &owner{a: a, info: info, work: make(chan func())}
	ready := make(chan error)
	go o.loop(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	owners[info.Ordinal] = o
	return o, nil
}

// loop never returns: the context lives as long as the process, and so does its thread.
func (o *owner) loop(ready chan<- error) {
	runtime.LockOSThread()
	ready <- o.open()
	for f := range o.work {
		f()
	}
}

// open retains the primary context (shared with any other user of the driver in this
// process, unlike cuCtxCreate) and creates the stream all work runs on. The stream is a
// blocking one, so the synchronous copies of the legacy default stream stay ordered with it.
func (o *owner) open() error {
	a, name := o.a, o.info.Name
	if err := a.check(a.cuDeviceGet(&o.dev, int32(o.info.Ordinal)), "device %d (%s): cuDeviceGet", o.info.Ordinal, name); err != nil {
		return err
	}
	if err := a.check(a.cuDevicePrimaryCtxRetain(&o.ctx, o.dev), "device %d (%s): cuDevicePrimaryCtxRetain", o.info.Ordinal, name); err != nil {
		return err
	}
	if err := a.check(a.cuCtxSetCurrent(o.ctx), "device %d (%s): cuCtxSetCurrent", o.info.Ordinal, name); err != nil {
		return err
	}
	if err := a.check(a.cuStreamCreate(&o.stream, 0), "device %d (%s): cuStreamCreate", o.info.Ordinal, name); err != nil {
		return err
	}
	o.mem = newAllocator(&driverMem{a: a, where: o.where()})
	o.mods = newModuleTable()
	return nil
}

// where names the device in error messages.
func (o *owner) where() string {
	return fmt.Sprintf("cuda:%d %s", o.info.Ordinal, o.info.Name)
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
