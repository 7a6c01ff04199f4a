package cuda

import (
	"runtime"
	"unsafe"
)

// driverMem is devMem on a real device. Its methods, like every driver call, must run on the
// device's owner thread.
type driverMem struct {
	a      *api
	where  string
	stream uintptr // the owner's: fills are ordered with its kernels
}

func (m *driverMem) alloc(n uint64) (uint64, error) {
	var p uint64
	if err := m.a.check(m.a.cuMemAlloc(&p, n), "%s: cuMemAlloc(%d bytes)", m.where, n); err != nil {
		return 0, err
	}
	return p, nil
}

func (m *driverMem) free(p uint64) error {
	return m.a.check(m.a.cuMemFree(p), "%s: cuMemFree(0x%x)", m.where, p)
}

func (m *driverMem) memset(p uint64, v byte, n uint64) error {
	return m.a.check(m.a.cuMemsetD8Async(p, v, n, m.stream), "%s: cuMemsetD8Async(0x%x, 0x%02x, %d)", m.where, p, v, n)
}

// The copies below are ordered on the owner's stream, so they need no ordering with the
// legacy stream: on a lane's or a partition's non-blocking stream a synchronous copy would not
// wait for the stream's kernels, nor they for it. From pageable host memory the driver stages
// the source before cuMemcpyHtoDAsync returns (the caller may reuse it); the copy to host
// waits for the stream so that dst holds the data on return. Go heap memory does not move.

// h2d copies src to device address dst.
func (o *owner) h2d(dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return o.a.check(o.a.cuMemcpyHtoDAsync(dst, unsafe.Pointer(&src[0]), uint64(len(src)), o.stream),
		"%s: cuMemcpyHtoDAsync(%d bytes)", o.where(), len(src))
}

// d2h copies len(dst) bytes from device address src, after the stream's earlier work.
func (o *owner) d2h(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	if err := o.a.check(o.a.cuMemcpyDtoHAsync(unsafe.Pointer(&dst[0]), src, uint64(len(dst)), o.stream),
		"%s: cuMemcpyDtoHAsync(%d bytes)", o.where(), len(dst)); err != nil {
		return err
	}
	err := o.a.check(o.a.cuStreamSynchronize(o.stream), "%s: cuMemcpyDtoHAsync(%d bytes): stream", o.where(), len(dst))
	runtime.KeepAlive(dst)
	return err
}

// d2d copies n bytes between device addresses.
func (o *owner) d2d(dst, src uint64, n int) error {
	if n == 0 {
		return nil
	}
	return o.a.check(o.a.cuMemcpyDtoDAsync(dst, src, uint64(n), o.stream), "%s: cuMemcpyDtoDAsync(%d bytes)", o.where(), n)
}

// memInfo returns the device's free and total memory.
func (o *owner) memInfo() (free, total uint64, err error) {
	err = o.a.check(o.a.cuMemGetInfo(&free, &total), "%s: cuMemGetInfo", o.where())
	return free, total, err
}
