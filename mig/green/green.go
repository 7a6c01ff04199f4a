package green

import (
	"context"
	"runtime"
	"time"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Partition is one SM group of a device: a green context with its own stream, owned by one
// goroutine locked to an OS thread (all driver calls of the partition run there, with the green
// context current). Kernels launched through it run on its SMs only.
type Partition struct {
	Device int // device ordinal
	Index  int // group index in Split's result
	SMs    int // SM count of the group, as the green context reports it

	a      *api
	green  uintptr // CUgreenCtx
	ctx    uintptr // CUcontext of the green context
	stream uintptr
	calls  chan func()
	done   chan struct{}
}

// DeviceSMs is the SM count of device dev (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).
func DeviceSMs(dev int) (int, error) {
	a, err := load()
	if err != nil {
		return 0, errs.Wrap(errs.NoDevice, err, "device %d", dev)
	}
	var d, n int32
	if err := a.check(a.cuDeviceGet(&d, int32(dev)), "green: device %d: cuDeviceGet", dev); err != nil {
		return 0, err
	}
	if err := a.check(a.cuDeviceGetAttribute(&n, 16, d), "green: device %d: SM count", dev); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Split makes groups partitions of device dev with at least minSMs SMs each (0: the largest
// multiple of 8 SMs that fits total/groups, see Plan). The SMs left over belong to no partition.
// Errors are coded and name the device: E_NO_DEVICE without a driver or device, E_UNSUPPORTED
// when the driver has no green contexts or cannot make that many groups, E_INPUT for a plan that
// does not fit.
func Split(dev, groups, minSMs int) ([]Partition, error) {
	a, err := load()
	if err != nil {
		return nil, errs.Wrap(errs.NoDevice, err, "device %d", dev)
	}
	var d int32
	if err := a.check(a.cuDeviceGet(&d, int32(dev)), "green: device %d: cuDeviceGet", dev); err != nil {
		return nil, err
	}
	var all resource
	if err := a.check(a.cuDeviceGetDevResource(d, &all, resourceTypeSM), "green: device %d: cuDeviceGetDevResource(SM)", dev); err != nil {
		return nil, err
	}
	var attr int32
	if err := a.check(a.cuDeviceGetAttribute(&attr, 16, d), "green: device %d: SM count", dev); err != nil {
		return nil, err
	}
	if all.SMCount() != int(attr) {
		// The CUdevResource layout (resource) is read by offset; a driver that moved smCount
		// must not be split by guesswork.
		return nil, errs.New(errs.Unsupported, "green: device %d: SM resource reports %d SMs, the device %d (CUdevResource layout changed?)", dev, all.SMCount(), attr)
	}
	size, err := Plan(all.SMCount(), groups, minSMs)
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "device %d", dev)
	}
	res := make([]resource, groups)
	var rest resource
	n := uint32(groups)
	if err := a.check(a.cuDevSmResourceSplitByCount(&res[0], &n, &all, &rest, 0, uint32(size)),
		"green: device %d: cuDevSmResourceSplitByCount(%d groups of %d of %d SMs)", dev, groups, size, all.SMCount()); err != nil {
		return nil, err
	}
	if int(n) != groups {
		return nil, errs.New(errs.Unsupported, "green: device %d: asked %d groups of %d of %d SMs, the driver made %d", dev, groups, size, all.SMCount(), n)
	}
	parts := make([]Partition, 0, groups)
	for i := range res {
		p, err := newPartition(a, d, dev, i, &res[i])
		if err != nil {
			for j := range parts {
				parts[j].Close()
			}
			return nil, err
		}
		parts = append(parts, *p)
	}
	return parts, nil
}

// newPartition creates the green context and its stream on a fresh owner thread.
func newPartition(a *api, d int32, dev, index int, res *resource) (*Partition, error) {
	p := &Partition{Device: dev, Index: index, a: a, calls: make(chan func()), done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		started <- p.create(d, res)
		for f := range p.calls {
			f()
		}
		close(p.done)
	}()
	if err := <-started; err != nil {
		close(p.calls)
		<-p.done
		return nil, err
	}
	return p, nil
}

func (p *Partition) create(d int32, res *resource) error {
	a := p.a
	var desc uintptr
	if err := a.check(a.cuDevResourceGenerateDesc(&desc, res, 1), "%s: cuDevResourceGenerateDesc", p.where()); err != nil {
		return err
	}
	if err := a.check(a.cuGreenCtxCreate(&p.green, desc, d, greenCtxDefaultStr), "%s: cuGreenCtxCreate", p.where()); err != nil {
		return err
	}
	if err := a.check(a.cuCtxFromGreenCtx(&p.ctx, p.green), "%s: cuCtxFromGreenCtx", p.where()); err != nil {
		a.cuGreenCtxDestroy(p.green)
		return err
	}
	if err := a.check(a.cuCtxSetCurrent(p.ctx), "%s: cuCtxSetCurrent", p.where()); err != nil {
		a.cuGreenCtxDestroy(p.green)
		return err
	}
	var got resource
	if err := a.check(a.cuGreenCtxGetDevResource(p.green, &got, resourceTypeSM), "%s: cuGreenCtxGetDevResource", p.where()); err != nil {
		a.cuGreenCtxDestroy(p.green)
		return err
	}
	p.SMs = got.SMCount()
	if err := a.check(a.cuGreenCtxStreamCreate(&p.stream, p.green, streamNonBlocking, 0), "%s: cuGreenCtxStreamCreate", p.where()); err != nil {
		a.cuGreenCtxDestroy(p.green)
		return err
	}
	return nil
}

func (p *Partition) where() string {
	return "green: device " + itoa(p.Device) + " partition " + itoa(p.Index) + " (" + itoa(p.SMs) + " SMs)"
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// do runs f on the owner thread.
func (p *Partition) do(f func() error) error {
	if p.calls == nil {
		return errs.New(errs.Internal, "green: partition is not open")
	}
	ch := make(chan error, 1)
	p.calls <- func() { ch <- f() }
	return <-ch
}

// Close destroys the stream and the green context and ends the owner thread.
func (p *Partition) Close() error {
	if p.calls == nil {
		return nil
	}
	err := p.do(func() error {
		if p.stream != 0 {
			p.a.cuStreamDestroy(p.stream)
		}
		return p.a.check(p.a.cuGreenCtxDestroy(p.green), "%s: cuGreenCtxDestroy", p.where())
	})
	close(p.calls)
	<-p.done
	p.calls = nil
	return err
}

// Alloc allocates n bytes of device memory in the partition's context.
func (p *Partition) Alloc(n int) (uint64, error) {
	var d uint64
	err := p.do(func() error {
		return p.a.check(p.a.cuMemAlloc(&d, uint64(max(n, 1))), "%s: cuMemAlloc(%d)", p.where(), n)
	})
	return d, err
}

// Free frees an Alloc'ed block.
func (p *Partition) Free(d uint64) error {
	return p.do(func() error { return p.a.check(p.a.cuMemFree(d), "%s: cuMemFree(0x%x)", p.where(), d) })
}

// Upload copies src to device address dst (synchronous).
func (p *Partition) Upload(dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return p.do(func() error {
		var pin runtime.Pinner
		pin.Pin(&src[0])
		defer pin.Unpin()
		return p.a.check(p.a.cuMemcpyHtoD(dst, unsafe.Pointer(&src[0]), uint64(len(src))), "%s: cuMemcpyHtoD(%d bytes)", p.where(), len(src))
	})
}

// Download copies len(dst) bytes from device address src (synchronous). src may be any
// value, such as another process's device pointer: the driver's error is returned coded.
func (p *Partition) Download(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	return p.do(func() error {
		var pin runtime.Pinner
		pin.Pin(&dst[0])
		defer pin.Unpin()
		return p.a.check(p.a.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), src, uint64(len(dst))), "%s: cuMemcpyDtoH(0x%x, %d bytes)", p.where(), src, len(dst))
	})
}

// Kernel is a loaded kernel of a partition's context.
type Kernel struct {
	mod, fn uintptr
	name    string
}

// Load JIT-compiles PTX text into the partition's context and returns entry name.
func (p *Partition) Load(ptx, name string) (Kernel, error) {
	k := Kernel{name: name}
	err := p.do(func() error {
		img := append([]byte(ptx), 0)
		var pin runtime.Pinner
		pin.Pin(&img[0])
		defer pin.Unpin()
		if err := p.a.check(p.a.cuModuleLoadDataEx(&k.mod, unsafe.Pointer(&img[0]), 0, nil, nil), "%s: cuModuleLoadDataEx(%s)", p.where(), name); err != nil {
			return err
		}
		if err := p.a.check(p.a.cuModuleGetFunction(&k.fn, k.mod, name), "%s: cuModuleGetFunction(%s)", p.where(), name); err != nil {
			p.a.cuModuleUnload(k.mod)
			return err
		}
		return nil
	})
	return k, err
}

// Launch enqueues k on the partition's stream with a 1-D grid. Each argument is passed as a
// 64-bit value; a 32-bit kernel parameter reads the low half (little-endian).
func (p *Partition) Launch(k Kernel, grid, block int, args ...uint64) error {
	return p.do(func() error {
		vals := append([]uint64(nil), args...)
		var params unsafe.Pointer
		var pin runtime.Pinner
		defer pin.Unpin()
		if len(vals) > 0 {
			ptrs := make([]unsafe.Pointer, len(vals))
			pin.Pin(&vals[0])
			for i := range vals {
				ptrs[i] = unsafe.Pointer(&vals[i])
			}
			pin.Pin(&ptrs[0])
			params = unsafe.Pointer(&ptrs[0])
		}
		r := p.a.cuLaunchKernel(k.fn, uint32(grid), 1, 1, uint32(block), 1, 1, 0, p.stream, params, nil)
		runtime.KeepAlive(vals)
		return p.a.check(r, "%s: launch %s <<<%d, %d>>>", p.where(), k.name, grid, block)
	})
}

// Sync waits for the partition's stream, polling (cuStreamQuery) so that the owner thread is
// never blocked in the driver and ctx bounds the wait (E_TIMEOUT).
func (p *Partition) Sync(ctx context.Context) error {
	for {
		var r cuResult
		if err := p.do(func() error { r = p.a.cuStreamQuery(p.stream); return nil }); err != nil {
			return err
		}
		switch r {
		case 0:
			return nil
		case 600: // NOT_READY
		default:
			return p.a.cuError(r, "%s: stream", p.where())
		}
		select {
		case <-ctx.Done():
			return errs.New(errs.Timeout, "%s: stream still busy: %v", p.where(), ctx.Err())
		case <-time.After(20 * time.Microsecond):
		}
	}
}
