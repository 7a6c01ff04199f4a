package cuda

import (
	"bytes"
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// CU_IPC_HANDLE_SIZE is 64: both handles cross the ABI by value as 64 opaque bytes.
func TestIPCHandleSizes(t *testing.T) {
	if s := unsafe.Sizeof(IPCMemHandle{}); s != 64 {
		t.Errorf("sizeof(CUipcMemHandle) = %d, want 64", s)
	}
	if s := unsafe.Sizeof(IPCEventHandle{}); s != 64 {
		t.Errorf("sizeof(CUipcEventHandle) = %d, want 64", s)
	}
}

func TestOpenRawWithoutDeviceIsCoded(t *testing.T) {
	if _, err := Devices(); err == nil {
		t.Skip("a device is present")
	}
	if _, err := OpenRaw(0); errs.CodeOf(err) != errs.NoDevice {
		t.Errorf("OpenRaw without a device: %v, want E_NO_DEVICE", err)
	}
}

// The Raw surface on a real device: dedicated allocations, stream-ordered copies, events
// (timing and interprocess), IPC export, and the refusal to import a handle in the process
// that exported it (which is why the cuda transport's ranks are processes).
func TestGPURawSurface(t *testing.T) {
	gpu(t)
	r, err := OpenRaw(-1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 1<<20 + 5
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	a, err := r.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Free(a)
	b, err := r.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Free(b)
	if err := r.Upload(ctx, a, src); err != nil {
		t.Fatal(err)
	}
	start, err := r.NewEvent(false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.DestroyEvent(start)
	end, err := r.NewEvent(false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.DestroyEvent(end)
	if err := r.Record(start); err != nil {
		t.Fatal(err)
	}
	if err := r.CopyAsync(b, a, n); err != nil {
		t.Fatal(err)
	}
	if err := r.Record(end); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitDone(ctx, end, "copy"); err != nil {
		t.Fatal(err)
	}
	ms, err := r.Elapsed(start, end)
	if err != nil || ms <= 0 {
		t.Errorf("elapsed %g ms, %v", ms, err)
	}
	got := make([]byte, n)
	if err := r.Download(ctx, got, b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Error("upload -> copy -> download changed the bytes")
	}
	t.Logf("cuMemcpyDtoDAsync of %d bytes: %.3f ms (%.0f GB/s)", n, ms, float64(n)/ms/1e6)

	ipcEv, err := r.NewEvent(true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.DestroyEvent(ipcEv)
	if _, err := r.ExportEvent(ipcEv); err != nil {
		t.Errorf("cuIpcGetEventHandle: %v", err)
	}
	if err := r.Record(ipcEv); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitEvent(ipcEv); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := r.ExportMem(a)
	if err != nil {
		t.Fatalf("cuIpcGetMemHandle: %v", err)
	}
	if h == (IPCMemHandle{}) {
		t.Error("an all-zero IPC handle")
	}
	if p, err := r.ImportMem(h); err == nil {
		_ = r.CloseMem(p)
		t.Log("this driver opened an IPC handle in the exporting process (CUDA documents a refusal)")
	} else {
		t.Logf("opening our own handle is refused, as documented: %v", err)
	}
}
