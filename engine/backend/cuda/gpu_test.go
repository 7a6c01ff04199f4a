package cuda

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// GPU tests: each skips, with the reason, where no usable CUDA device exists. They use the
// registry's device choice ($TESSERA_CUDA_DEVICE, default 0) and poison mode, so any byte a
// kernel fails to write reads as NaN.

func gpu(t *testing.T) *Backend {
	t.Helper()
	b := &Backend{ordinal: -1, Poison: true}
	if err := b.Available(); err != nil {
		t.Skipf("no usable CUDA device: %v", err)
	}
	return b
}

// onDevice runs f on the owner thread and fails the test on error.
func onDevice(t *testing.T, b *Backend, f func() error) {
	t.Helper()
	if err := b.o.do(f); err != nil {
		t.Fatal(err)
	}
}

func f32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

func TestGPUDeviceDiscovery(t *testing.T) {
	b := gpu(t)
	devs, err := Devices()
	if err != nil || len(devs) == 0 {
		t.Fatalf("Devices() = %v, %v", devs, err)
	}
	for _, d := range devs {
		t.Logf("device %d: %s uuid=%s pci=%s cc=%d.%d SMs=%d mem=%.1f GiB L2=%d KiB shared=%d/%d B ECC=%v MIG=%s",
			d.Ordinal, d.Name, d.UUID, d.PCI, d.CCMajor, d.CCMinor, d.SMs, float64(d.TotalMem)/(1<<30),
			d.L2Bytes>>10, d.MaxShared, d.MaxSharedOptIn, d.ECC, d.MIG)
		switch {
		case d.Name == "" || d.SMs < 1 || d.TotalMem < 1<<30 || d.L2Bytes < 1<<20:
			t.Errorf("device %d: implausible attributes %+v", d.Ordinal, d)
		case len(d.UUID) != 40 || !(strings.HasPrefix(d.UUID, "GPU-") || strings.HasPrefix(d.UUID, "MIG-")):
			t.Errorf("device %d: UUID %q", d.Ordinal, d.UUID)
		case d.MaxThreads != 1024 || d.MaxShared != 48<<10 || d.MaxSharedOptIn <= d.MaxShared:
			t.Errorf("device %d: launch limits threads=%d shared=%d optin=%d", d.Ordinal, d.MaxThreads, d.MaxShared, d.MaxSharedOptIn)
		}
		if !strings.Contains(" instance enabled disabled unsupported unknown ", " "+d.MIG+" ") {
			t.Errorf("device %d: MIG state %q", d.Ordinal, d.MIG)
		}
	}
	info, _ := b.Info()
	if want := info.Arch() + " (" + strconv.Itoa(info.SMs) + " SMs)"; !strings.HasSuffix(b.Device(), want) && info.MIG != "instance" {
		t.Errorf("Device() = %q, want suffix %q", b.Device(), want)
	}
	if b.DeviceClass() != "cuda/"+info.Arch() {
		t.Errorf("DeviceClass() = %q", b.DeviceClass())
	}
	if !strings.HasPrefix(b.Driver(), "CUDA ") {
		t.Errorf("Driver() = %q", b.Driver())
	}
	t.Logf("Device() = %q, DeviceClass() = %q, Driver() = %q", b.Device(), b.DeviceClass(), b.Driver())
}

func TestGPUMemoryRoundTripAndReuse(t *testing.T) {
	b := gpu(t)
	o := b.o
	const n = 1<<20 + 3 // odd size: not a multiple of any vector width
	src := make([]byte, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	onDevice(t, b, func() error {
		before := o.mem.snapshot()
		p1, err := o.mem.alloc(n)
		if err != nil {
			return err
		}
		p2, err := o.mem.alloc(n)
		if err != nil {
			return err
		}
		// Poison mode: a fresh block reads back as 0xFF.
		got := make([]byte, n)
		if err := o.d2h(got, p2); err != nil {
			return err
		}
		if bytes.Count(got, []byte{0xFF}) != n {
			t.Errorf("poisoned block is not all 0xFF")
		}
		if err := o.h2d(p1, src); err != nil {
			return err
		}
		if err := o.d2d(p2, p1, n); err != nil {
			return err
		}
		if err := o.d2h(got, p2); err != nil {
			return err
		}
		if !bytes.Equal(got, src) {
			t.Errorf("host -> device -> device -> host changed the bytes")
		}
		if err := o.mem.release(p2); err != nil {
			return err
		}
		if sizeClass(n+1000) != sizeClass(n) {
			t.Fatalf("test assumes %d and %d share a size class", n, n+1000)
		}
		p3, err := o.mem.alloc(n + 1000) // same size class: must reuse p2, poisoned again
		if err != nil {
			return err
		}
		if p3 != p2 {
			t.Errorf("same-class allocation did not reuse the freed block")
		}
		if err := o.d2h(got, p3); err != nil {
			return err
		}
		if bytes.Count(got, []byte{0xFF}) != n {
			t.Errorf("reused block still holds the previous owner's bytes")
		}
		for _, p := range []uint64{p1, p3} {
			if err := o.mem.release(p); err != nil {
				return err
			}
		}
		after := o.mem.snapshot()
		if after.LiveBlocks != before.LiveBlocks || after.LiveBytes != before.LiveBytes {
			t.Errorf("leak: live blocks %d -> %d", before.LiveBlocks, after.LiveBlocks)
		}
		return nil
	})
}

func TestGPUOutOfMemoryIsCoded(t *testing.T) {
	b := gpu(t)
	err := b.o.do(func() error {
		_, err := b.o.mem.alloc(1 << 50) // a pebibyte
		return err
	})
	if errs.CodeOf(err) != errs.OOM || !strings.Contains(err.Error(), "cuMemAlloc") {
		t.Fatalf("got %v, want E_OOM from cuMemAlloc", err)
	}
	// OOM is not sticky: the device still works.
	onDevice(t, b, func() error {
		p, err := b.o.mem.alloc(4096)
		if err == nil {
			err = b.o.mem.release(p)
		}
		return err
	})
}

func TestGPUHandWrittenKernelComputes(t *testing.T) {
	b := gpu(t)
	const n = 1_000_003
	rng := rand.New(rand.NewPCG(3, 4))
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = rng.Float32()*8-4, rng.Float32()*8-4
	}
	got := make([]byte, 4*n)
	onDevice(t, b, func() error {
		o := b.o
		k, err := o.function(vaddPTX(n), "vadd")
		if err != nil {
			return err
		}
		t.Logf("vadd: %d registers, %d bytes local memory", k.regs, k.localBytes)
		var bufs [3]uint64
		for i := range bufs {
			if bufs[i], err = o.mem.alloc(4 * n); err != nil {
				return err
			}
			defer o.mem.release(bufs[i])
		}
		if err := o.h2d(bufs[0], f32Bytes(x)); err != nil {
			return err
		}
		if err := o.h2d(bufs[1], f32Bytes(y)); err != nil {
			return err
		}
		s := shape{Grid: [3]int{(n + 255) / 256, 1, 1}, Threads: 256}
		if err := o.launch(k, s, bufs[:]); err != nil {
			return err
		}
		if err := o.sync("vadd"); err != nil {
			return err
		}
		return o.d2h(got, bufs[2])
	})
	for i := range n {
		want := x[i] + y[i] // Go float32 addition rounds to nearest even, as add.rn.f32 does
		if g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); math.Float32bits(g) != math.Float32bits(want) {
			t.Fatalf("c[%d] = %g, want %g (and every element is checked bitwise)", i, g, want)
		}
	}
}

func TestGPUDynamicSharedMemoryAbove48KiB(t *testing.T) {
	b := gpu(t)
	const threads, shared = 256, 160 << 10
	got := make([]byte, 4*threads)
	onDevice(t, b, func() error {
		o := b.o
		k, err := o.function(smemPTX(shared, threads), "smem_ring")
		if err != nil {
			return err
		}
		out, err := o.mem.alloc(4 * threads)
		if err != nil {
			return err
		}
		defer o.mem.release(out)
		if err := o.launch(k, shape{Grid: [3]int{1, 1, 1}, Threads: threads, Shared: shared}, []uint64{out}); err != nil {
			return err
		}
		if k.dynShared != shared {
			t.Errorf("dynamic shared limit is %d after a %d-byte launch", k.dynShared, shared)
		}
		if err := o.sync("smem_ring"); err != nil {
			return err
		}
		return o.d2h(got, out)
	})
	for i := range threads {
		if v, want := binary.LittleEndian.Uint32(got[4*i:]), uint32((i+1)%threads+1); v != want {
			t.Fatalf("out[%d] = %d, want %d", i, v, want)
		}
	}
}

// The module table loads one PTX once: the second request is served from memory, and a load
// that bypasses the table compiles again (the driver's own disk cache makes that cheap).
func TestGPUModuleTableLoadsOnce(t *testing.T) {
	b := gpu(t)
	src := vaddPTX(4242)
	onDevice(t, b, func() error {
		o := b.o
		loads := o.mods.loads
		k1, err := o.function(src, "vadd")
		if err != nil {
			return err
		}
		k2, err := o.function(src, "vadd")
		if err != nil {
			return err
		}
		if k1 != k2 || o.mods.loads-loads != 1 {
			t.Errorf("two requests of one PTX: %d loads, same kernel %v; want 1 load, the same kernel", o.mods.loads-loads, k1 == k2)
		}
		k3, err := o.load(src, "vadd") // bypasses the table
		if err != nil {
			return err
		}
		if k3.fn == 0 || o.mods.loads-loads != 2 {
			t.Errorf("a direct load: %d loads, want 2", o.mods.loads-loads)
		}
		return o.a.check(o.a.cuModuleUnload(k3.mod), "unload")
	})
}

func TestGPUInvalidPTXIsUnsupportedWithLog(t *testing.T) {
	b := gpu(t)
	err := b.o.do(func() error {
		_, err := b.o.load(badPTX, "bad_kernel")
		return err
	})
	if errs.CodeOf(err) != errs.Unsupported {
		t.Fatalf("got %v, want E_UNSUPPORTED", err)
	}
	for _, want := range []string{"bad_kernel", "cuModuleLoadDataEx", "JIT log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	t.Logf("error: %v", err)
}

// timingExecution binds the hand-written vadd kernel into an execution, as prepare does for
// generated modules, so the event timing path is tested without the code generator.
func timingExecution(t *testing.T, b *Backend, n int) *execution {
	p := &compiler.Program{Kernels: []*tile.Kernel{{Name: "vadd", Params: []tile.Param{
		{Buffer: 0, DType: numerics.F32, Len: n}, {Buffer: 1, DType: numerics.F32, Len: n},
		{Buffer: 2, DType: numerics.F32, Len: n, Output: true}}}}}
	mod := &ptx.Module{PTX: vaddPTX(n), Entry: "vadd", Grid: [3]int{(n + 255) / 256, 1, 1}, Threads: 256}
	e := &execution{o: b.o, p: p, mods: []*ptx.Module{mod}, bufs: make([]uint64, 3)}
	onDevice(t, b, func() error {
		fn, err := b.o.function(mod.PTX, mod.Entry)
		if err != nil {
			return err
		}
		e.fns = []*kernelFn{fn}
		for i := range e.bufs {
			if e.bufs[i], err = b.o.mem.alloc(uint64(4 * n)); err != nil {
				return err
			}
		}
		return nil
	})
	return e
}

func TestGPUEventTiming(t *testing.T) {
	b := gpu(t)
	const n = 1 << 24 // 64 MiB per operand: long enough to time
	e := timingExecution(t, b, n)
	defer b.o.do(e.release)
	for _, flush := range []bool{true, false} {
		var times []float64
		onDevice(t, b, func() error {
			if err := e.runAll(false); err != nil {
				return err
			}
			var err error
			times, err = e.time(TimeOptions{Kernel: 0, Reps: 20, NoFlushL2: !flush})
			return err
		})
		if len(times) != 20 {
			t.Fatalf("%d times for 20 reps", len(times))
		}
		for i, ms := range times {
			if !(ms > 0 && ms < 1000) {
				t.Errorf("flush=%v rep %d: %g ms", flush, i, ms)
			}
		}
		med := median(times)
		// Three 64 MiB streams: the time must be within what HBM can do (< 4 TB/s on an
		// H100) and not absurdly slow; a wrong event pair shows up as 0 or as microseconds.
		gbs := 3 * 4 * float64(n) / (med * 1e-3) / 1e9
		t.Logf("vadd n=%d flush=%v: median %.4f ms, %.0f GB/s", n, flush, med, gbs)
		if gbs > 6000 || gbs < 50 {
			t.Errorf("flush=%v: %.0f GB/s is not a plausible vector add bandwidth", flush, gbs)
		}
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestGPUIllegalAddress runs the fault in a child process: an illegal address kills the
// context for the rest of the process, so the parent (and every later test) stays healthy.
func TestGPUIllegalAddress(t *testing.T) {
	gpu(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestGPUIllegalAddressChild$", "-test.v")
	cmd.Env = append(os.Environ(), "TESSERA_CUDA_FAULT_CHILD=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child output:\n%s", out)
	if err != nil {
		t.Fatalf("child failed: %v", err)
	}
	if !strings.Contains(string(out), "FAULT-CHECKED") {
		t.Fatal("child did not reach its checks")
	}
}

func TestGPUIllegalAddressChild(t *testing.T) {
	if os.Getenv("TESSERA_CUDA_FAULT_CHILD") != "1" {
		t.Skip("runs only as TestGPUIllegalAddress's child process")
	}
	b := gpu(t)
	b.Sync = true
	s := shape{Grid: [3]int{2, 1, 1}, Threads: 32}
	err := b.o.do(func() error {
		k, err := b.o.function(faultPTX, "fault_store")
		if err != nil {
			return err
		}
		if err := b.o.launch(k, s, []uint64{0xdead0000}); err != nil {
			return err
		}
		return b.o.sync("kernel fault_store " + s.String())
	})
	if errs.CodeOf(err) != errs.IllegalAddress {
		t.Fatalf("got %v, want E_ILLEGAL_ADDRESS", err)
	}
	for _, want := range []string{"cuda:", b.info.Name, "kernel fault_store", s.String(), "CUDA_ERROR_ILLEGAL_ADDRESS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	// The context is dead now: the next call is refused with the cause, not a cascade.
	next := b.o.do(func() error { _, err := b.o.mem.alloc(16); return err })
	if next == nil || !strings.Contains(next.Error(), "unusable after an earlier fault") || !strings.Contains(next.Error(), "ILLEGAL_ADDRESS") {
		t.Errorf("call after the fault: %v", next)
	}
	if av := b.Available(); errs.CodeOf(av) != errs.IllegalAddress {
		t.Errorf("Available() after the fault = %v, want the fault", av)
	}
	t.Logf("fault error: %v", err)
	t.Log("FAULT-CHECKED")
}
