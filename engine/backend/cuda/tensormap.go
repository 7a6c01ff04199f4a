package cuda

import (
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// CUtensorMap* enum values (cuda.h).
const (
	tmapFloat16       = 6
	tmapBFloat16      = 9
	tmapSwizzle128    = 3
	tmapL2Promote128  = 2
	tmapDescriptorLen = 128
)

// tensorMap encodes tm over the buffer at device address buf and copies the descriptor into a
// device allocation of its own (the kernel reads it from global memory, after a
// fence.proxy.tensormap acquire); the caller releases that allocation. Owner thread only.
func (o *owner) tensorMap(tm ptx.TensorMap, buf uint64) (uint64, error) {
	rank := len(tm.Dims)
	if rank < 1 || rank > 5 || len(tm.Strides) != rank-1 || len(tm.Box) != rank {
		return 0, errs.New(errs.Internal, "cuda: tensor map of rank %d with %d strides and %d box dims", rank, len(tm.Strides), len(tm.Box))
	}
	// The descriptor must be 64-byte aligned: carve it out of a larger buffer.
	raw := make([]byte, tmapDescriptorLen+64)
	off := (64 - int(uintptr(unsafe.Pointer(&raw[0]))%64)) % 64
	desc := raw[off : off+tmapDescriptorLen]
	dtype := int32(tmapBFloat16)
	if tm.F16 {
		dtype = tmapFloat16
	}
	elemStrides := make([]uint32, rank)
	for i := range elemStrides {
		elemStrides[i] = 1
	}
	strides := append([]uint64(nil), tm.Strides...)
	if len(strides) == 0 {
		strides = []uint64{0} // never read for rank 1; keeps the pointer valid
	}
	r := o.a.cuTensorMapEncodeTiled(unsafe.Pointer(&desc[0]), dtype, uint32(rank), buf, &tm.Dims[0], &strides[0],
		&tm.Box[0], &elemStrides[0], 0, tmapSwizzle128, tmapL2Promote128, 0)
	if err := o.a.check(r, "%s: cuTensorMapEncodeTiled(dims %v, strides %v, box %v)", o.where(), tm.Dims, tm.Strides, tm.Box); err != nil {
		return 0, err
	}
	addr, err := o.mem.alloc(tmapDescriptorLen)
	if err != nil {
		return 0, err
	}
	if err := o.h2d(addr, desc); err != nil {
		_ = o.mem.release(addr)
		return 0, err
	}
	return addr, nil
}
