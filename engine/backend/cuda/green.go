package cuda

import (
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// SMResource is a CUdevResource (cuda.h, CUDA 12.4 to 13): a 4-byte type, 92 bytes of padding
// and a 48-byte union whose SM member starts with the unsigned smCount; 144 bytes in all. The
// one place this layout is written down: mig/green reads it through this type too.
type SMResource [144]byte

const (
	// ResourceTypeSM is CU_DEV_RESOURCE_TYPE_SM.
	ResourceTypeSM = 1
	// GreenDefaultStream is CU_GREEN_CTX_DEFAULT_STREAM, the flag cuGreenCtxCreate requires.
	GreenDefaultStream = 1
	// StreamNonBlocking is CU_STREAM_NON_BLOCKING, the flag cuGreenCtxStreamCreate requires.
	StreamNonBlocking = 1
	smCountOffset     = 96 // of smCount in SMResource
	// SMGranularity is the SM group size the driver splits an H100 into (design.md §10):
	// a partition's SM count is rounded up to a multiple of it.
	SMGranularity = 8
)

// SMCount is the resource's SM count.
func (r *SMResource) SMCount() int { return int(*(*uint32)(unsafe.Pointer(&r[smCountOffset]))) }

func (a *api) hasGreen() bool {
	return a.cuDeviceGetDevResource != nil && a.cuDevSmResourceSplitByCount != nil && a.cuDevResourceGenerateDesc != nil &&
		a.cuGreenCtxCreate != nil && a.cuCtxFromGreenCtx != nil && a.cuGreenCtxStreamCreate != nil && a.cuGreenCtxGetDevResource != nil
}

// openGreen makes the owner's context a green context of sms SMs of its device (one SM group
// split off the device's SM resource; the rest stays unused by this process) with its own
// non-blocking stream, and makes it current on the owner thread. It returns the SM count the
// driver granted. The device class does not change: no kernel may depend on the SM count, and
// the partitions suite checks exactly that.
func (o *owner) openGreen(sms int) (int, error) {
	a, where := o.a, o.where()
	if !a.hasGreen() {
		return 0, errs.New(errs.Unsupported, "%s: partition of %d SMs: the driver has no green contexts (CUDA 12.4+)", where, sms)
	}
	if sms <= 0 || sms%SMGranularity != 0 || sms > o.info.SMs {
		return 0, errs.New(errs.Input, "%s: partition of %d SMs: want a multiple of %d SMs, at most %d", where, sms, SMGranularity, o.info.SMs)
	}
	var all, group, rest SMResource
	if err := a.check(a.cuDeviceGetDevResource(o.dev, &all, ResourceTypeSM), "%s: cuDeviceGetDevResource(SM)", where); err != nil {
		return 0, err
	}
	if all.SMCount() != o.info.SMs {
		// The resource is read by offset: a driver that moved smCount must not be split by guesswork.
		return 0, errs.New(errs.Unsupported, "%s: SM resource reports %d SMs, the device %d (CUdevResource layout changed?)", where, all.SMCount(), o.info.SMs)
	}
	n := uint32(1)
	if err := a.check(a.cuDevSmResourceSplitByCount(&group, &n, &all, &rest, 0, uint32(sms)),
		"%s: cuDevSmResourceSplitByCount(1 group of %d SMs)", where, sms); err != nil {
		return 0, err
	}
	if n != 1 || group.SMCount() < sms {
		return 0, errs.New(errs.Unsupported, "%s: asked 1 group of %d SMs, the driver made %d of %d", where, sms, n, group.SMCount())
	}
	var desc uintptr
	if err := a.check(a.cuDevResourceGenerateDesc(&desc, &group, 1), "%s: cuDevResourceGenerateDesc", where); err != nil {
		return 0, err
	}
	if err := a.check(a.cuGreenCtxCreate(&o.green, desc, o.dev, GreenDefaultStream), "%s: cuGreenCtxCreate(%d SMs)", where, sms); err != nil {
		return 0, err
	}
	if err := a.check(a.cuCtxFromGreenCtx(&o.ctx, o.green), "%s: cuCtxFromGreenCtx", where); err != nil {
		return 0, err
	}
	if err := a.check(a.cuCtxSetCurrent(o.ctx), "%s: cuCtxSetCurrent(green)", where); err != nil {
		return 0, err
	}
	var got SMResource
	if err := a.check(a.cuGreenCtxGetDevResource(o.green, &got, ResourceTypeSM), "%s: cuGreenCtxGetDevResource", where); err != nil {
		return 0, err
	}
	if err := a.check(a.cuGreenCtxStreamCreate(&o.stream, o.green, StreamNonBlocking, 0), "%s: cuGreenCtxStreamCreate", where); err != nil {
		return 0, err
	}
	return got.SMCount(), nil
}
