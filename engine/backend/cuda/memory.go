package cuda

import (
	"unsafe"
)

// driverMem is devMem on a real device. Its methods, like every driver call, must run on the
// device's owner thread.
type driverMem struct {
	a     *api
	where string
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
	return m.a.check(m.a.cuMemsetD8(p, v, n), "%s: cuMemsetD8(0x%x, 0x%02x, %d)", m.where, p, v, n)
}

// The copies below are the synchronous driver copies: they return when host memory may be
// reused (host to device) or holds the data (device to host), and they are ordered after
// earlier work on the owner's blocking stream. Go heap memory does not move, and purego keeps
// the slice alive for the duration of the call, which is all the driver holds it for.

// h2d copies src to device address dst.
func (o *owner) h2d(dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return o.a.check(o.a.cuMemcpyHtoD(dst, unsafe.Pointer(&src[0]), uint64(len(src))),
		"%s: cuMemcpyHtoD(%d bytes)", o.where(), len(src))
}

// d2h copies len(dst) bytes from device address src.
func (o *owner) d2h(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	return o.a.check(o.a.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), src, uint64(len(dst))),
		"%s: cuMemcpyDtoH(%d bytes)", o.where(), len(dst))
}

// d2d copies n bytes between device addresses.
func (o *owner) d2d(dst, src uint64, n int) error {
	if n == 0 {
		return nil
	}
	return o.a.check(o.a.cuMemcpyDtoD(dst, src, uint64(n)), "%s: cuMemcpyDtoD(%d bytes)", o.where(), n)
}

// memInfo returns the device's free and total memory.
func (o *owner) memInfo() (free, total uint64, err error) {
	err = o.a.check(o.a.cuMemGetInfo(&free, &total), "%s: cuMemGetInfo", o.where())
	return free, total, err
}
