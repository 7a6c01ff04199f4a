package cudaipc

import (
	"context"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
)

// Device is what a DeviceComm needs from one GPU. *cuda.Raw implements it (Open returns one);
// the tests' simulated device implements it too, so the whole protocol (fences, staging,
// mappings, desync and timeout handling) runs in CI with ranks as goroutines.
//
// Work methods (CopyAsync, Launch, Record, WaitEvent) enqueue on the device's one stream and
// return; Upload, Download and WaitDone wait, bounded by ctx.
type Device interface {
	Info() cuda.DeviceInfo
	Alloc(n int) (uint64, error)
	Free(p uint64) error
	CopyAsync(dst, src uint64, n int) error
	Upload(ctx context.Context, dst uint64, src []byte) error
	Download(ctx context.Context, dst []byte, src uint64) error
	Launch(ptx, entry string, grid, threads int, args []uint64) error
	NewEvent(interprocess bool) (cuda.Event, error)
	DestroyEvent(e cuda.Event) error
	Record(e cuda.Event) error
	WaitEvent(e cuda.Event) error
	Done(e cuda.Event) (bool, error)
	WaitDone(ctx context.Context, e cuda.Event, what string) error
	Elapsed(start, end cuda.Event) (float64, error)
	ExportMem(p uint64) (cuda.IPCMemHandle, error)
	ImportMem(h cuda.IPCMemHandle) (uint64, error)
	CloseMem(p uint64) error
	ExportEvent(e cuda.Event) (cuda.IPCEventHandle, error)
	ImportEvent(h cuda.IPCEventHandle) (cuda.Event, error)
}

var _ Device = (*cuda.Raw)(nil)

// Open returns device ordinal (-1: $TESSERA_CUDA_DEVICE, default 0), or E_NO_DEVICE /
// E_UNSUPPORTED where there is none.
func Open(ordinal int) (Device, error) {
	r, err := cuda.OpenRaw(ordinal)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// OpenLocal opens the device of this process's local rank (cuda.OpenLocalRaw:
// $TESSERA_CUDA_DEVICE, else LOCAL_RANK modulo the visible devices).
func OpenLocal() (Device, error) {
	r, err := cuda.OpenLocalRaw()
	if err != nil {
		return nil, err
	}
	return r, nil
}
