// Package cuda is the CUDA backend: it runs the compiler's own PTX (engine/compiler/ptx) on
// NVIDIA GPUs through the driver API, bound at run time with purego (dlopen libcuda.so.1), so
// binaries build with CGO_ENABLED=0 everywhere and report E_NO_DEVICE where there is no driver.
//
// Layout: driver.go binds the API; errors.go maps CUresult to error codes; device.go discovers
// devices (nvml.go adds the driver release and MIG mode); owner.go gives each device one
// goroutine locked to an OS thread that holds the primary context and makes every driver call;
// memory.go and alloc.go hold device memory (a caching allocator with a poison mode);
// module.go JIT-compiles PTX (the driver caches the result on disk) and loads it; launch.go
// launches; exec.go runs a Program; timing.go times one with CUDA events.
//
// Environment: TESSERA_CUDA_DISABLE=1 makes the backend unavailable; TESSERA_CUDA_DEVICE=N
// picks the device of the registered backend; TESSERA_CUDA_SMS=N runs it on an SM partition of
// N SMs (a green context, Placement), as CUDA_VISIBLE_DEVICES=MIG-... places a process on a MIG
// instance; TESSERA_CUDA_SYNC=1 synchronises after every
// kernel (faults name their kernel); TESSERA_CUDA_POISON=1 fills every allocation with 0xFF.
package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/profile"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func init() { backend.Register(&Backend{ordinal: -1}) }

// Backend runs programs on one CUDA device. The registered backend uses device
// $TESSERA_CUDA_DEVICE, else the process's LOCAL_RANK modulo the visible devices (localOrdinal),
// else 0; New picks another.
type Backend struct {
	// Sync waits after every kernel so that an asynchronous fault names its kernel; without it
	// a Run synchronises once, after the last kernel. TESSERA_CUDA_SYNC=1 sets it.
	Sync bool
	// Poison fills every device block with 0xFF before use (see allocator); tests set it, as
	// does TESSERA_CUDA_POISON=1. It applies from the first Available call on.
	Poison bool

	ordinal int // -1: from the environment
	at      Placement
	atEnv   bool // at comes from TESSERA_CUDA_SMS

	once   sync.Once
	err    error
	info   DeviceInfo
	driver int // cuDriverGetVersion
	o      *owner
	target ptx.Target
}

var _ backend.Backend = (*Backend)(nil)

// New returns a backend for device ordinal (not registered; the registry holds device 0 or
// $TESSERA_CUDA_DEVICE). Backends of one device share its owner thread, memory and modules.
func New(ordinal int) *Backend { return &Backend{ordinal: ordinal} }

// NewPlaced returns a backend for device ordinal at a placement: a lane of its own (its own
// stream and thread, for concurrent streams) and/or an SM partition. Backends of one ordinal
// and placement share their owner.
func NewPlaced(ordinal int, at Placement) *Backend { return &Backend{ordinal: ordinal, at: at} }

// Placement is where the backend runs (the zero value: the whole device, shared stream).
func (b *Backend) Placement() Placement { return b.at }

// Name is "cuda".
func (*Backend) Name() string { return "cuda" }

// Available returns nil when a device of compute capability 9.0 or newer is usable,
// E_NO_DEVICE with the reason when there is no driver or device, E_UNSUPPORTED for an older
// GPU (the code generator targets sm_90).
// After a fault that kills the device's context (an illegal address, ...) it returns that
// fault: nothing can run on the device again in this process.
func (b *Backend) Available() error {
	b.once.Do(b.init)
	if b.err != nil {
		return b.err
	}
	return b.o.unusable()
}

func (b *Backend) init() {
	if v := os.Getenv("TESSERA_CUDA_DISABLE"); v != "" && v != "0" {
		b.err = errs.New(errs.NoDevice, "cuda backend disabled by TESSERA_CUDA_DISABLE=%s", v)
		return
	}
	b.Sync = b.Sync || envOn("TESSERA_CUDA_SYNC")
	b.Poison = b.Poison || envOn("TESSERA_CUDA_POISON")
	if b.ordinal < 0 {
		if s := os.Getenv("TESSERA_CUDA_SMS"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				b.err = errs.New(errs.Input, "TESSERA_CUDA_SMS=%q is not an SM count", s)
				return
			}
			b.at.SMs, b.atEnv = n, true
		}
	}
	devs, err := Devices()
	if err != nil {
		b.err = err
		return
	}
	ord := b.ordinal
	if ord < 0 {
		if ord, err = localOrdinal(os.Getenv, len(devs)); err != nil {
			b.err = err
			return
		}
	}
	if ord >= len(devs) {
		b.err = errs.New(errs.NoDevice, "cuda device %d requested, %d visible", ord, len(devs))
		return
	}
	b.info = devs[ord]
	if b.info.CCMajor < 9 {
		b.err = errs.New(errs.Unsupported, "cuda:%d %s is %s; the PTX generator targets sm_90 and newer", ord, b.info.Name, b.info.Arch())
		return
	}
	a, _ := loadDriver() // loaded by Devices
	if b.driver, err = driverVersion(a); err != nil {
		b.err = err
		return
	}
	if b.o, err = ownerFor(a, b.info, b.at); err != nil {
		if b.atEnv {
			err = errs.Wrap(errs.CodeOf(err), err, "TESSERA_CUDA_SMS=%d", b.at.SMs)
		}
		b.err = err
		return
	}
	b.info = b.o.info // a partition's SM count
	if b.Poison {
		b.o.mem.setPoison(true)
	}
	if envOn("TESSERA_CUDA_EXACT_ALLOC") {
		b.o.mem.setExact(true)
	}
	b.target = targetFor(b.info)
}

func envOn(name string) bool {
	v := os.Getenv(name)
	return v != "" && v != "0"
}

// targetFor picks the PTX target: sm_90a (wgmma, setmaxnreg) on compute capability 9.0
// exactly, since sm_90a code runs only there; plain sm_90 PTX on anything newer, which the
// driver JIT-compiles forward.
func targetFor(d DeviceInfo) ptx.Target {
	t := ptx.H100
	if d.CCMajor == 9 && d.CCMinor == 0 {
		t.ArchSuffix = "a"
	}
	if d.SMs > 0 {
		t.SMs = d.SMs // grid-stride kernels size their grids from it
	}
	return t
}

// Info describes the backend's device, or fails as Available does when none was found.
func (b *Backend) Info() (DeviceInfo, error) {
	if !b.found() {
		return DeviceInfo{}, b.err
	}
	return b.info, nil
}

// found reports whether init found a usable device (it may have failed since).
func (b *Backend) found() bool {
	b.once.Do(b.init)
	return b.err == nil
}

// Device is e.g. "NVIDIA H100 80GB HBM3 sm_90 (132 SMs)", with " SM partition" on a green
// context, or "none".
func (b *Backend) Device() string {
	if !b.found() {
		return "none"
	}
	s := b.info.String()
	if b.at.SMs > 0 {
		s += " SM partition"
	}
	return s
}

// DeviceClass is "cuda/" + the architecture, e.g. "cuda/sm_90": the generated code, and so the
// bits, depend on the architecture and not on the SM count (no split depends on it).
func (b *Backend) DeviceClass() string {
	if !b.found() {
		return "cuda/none"
	}
	return "cuda/" + b.info.Arch()
}

// Driver is e.g. "CUDA 13.0, driver 580.65.06" (the release needs NVML).
func (b *Backend) Driver() string {
	if !b.found() {
		return ""
	}
	s := fmt.Sprintf("CUDA %d.%d", b.driver/1000, b.driver%1000/10)
	if r := nvmlDriverVersion(); r != "" {
		s += ", driver " + r
	}
	return s
}

// Determinism is "bitwise": kernels run in program order on one stream, with no atomics and
// fixed reduction orders (the PTX generator's contract), so bits depend only on the inputs,
// the program and the device class.
func (b *Backend) Determinism() string { return "bitwise" }

// Run checks inputs against the program's graph, runs every kernel in order on the device and
// returns a fresh copy of each output.
func (b *Backend) Run(p *compiler.Program, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return b.RunProfiled(p, inputs, nil)
}

// RunProfiled is Run reporting to sink (nil: off): each launch timed by CUDA events recorded
// around it on the launching stream, with the kernel's registers, shared and local memory and
// theoretical occupancy; the input and output copies with their bytes (profile.go).
func (b *Backend) RunProfiled(p *compiler.Program, inputs map[string]*tensor.Tensor, sink profile.Sink) ([]*tensor.Tensor, error) {
	p = failpoint.Apply(failpoint.CUDAReduceTileFromSMs, p, b.retileBySMs)
	mods, err := b.begin(p, inputs)
	if err != nil {
		return nil, err
	}
	var out []*tensor.Tensor
	err = b.o.do(func() error {
		e, err := b.o.prepare(p, mods)
		if err != nil {
			return err
		}
		if sink != nil {
			out, err = e.runProfiled(inputs, sink)
		} else {
			err = e.upload(inputs)
			if err == nil {
				err = e.runAll(b.Sync)
			}
			if err == nil {
				out, err = e.download()
			}
		}
		release := e.release
		if failpoint.Enabled(failpoint.CUDABuffersKeptPerRun) {
			release = e.forget
		}
		if rerr := release(); err == nil {
			err = rerr
		}
		return err
	})
	return out, err
}

// begin does the checks and the code generation that need no device.
func (b *Backend) begin(p *compiler.Program, inputs map[string]*tensor.Tensor) ([]*ptx.Module, error) {
	if err := b.Available(); err != nil {
		return nil, err
	}
	if p == nil || p.Graph == nil {
		return nil, errs.New(errs.Input, "cuda: nil program or program without graph")
	}
	if err := graph.CheckInputs(p.Graph, inputs); err != nil {
		return nil, err
	}
	if err := checkProgram(p); err != nil {
		return nil, err
	}
	mods := make([]*ptx.Module, len(p.Kernels))
	for i, k := range p.Kernels {
		m, err := generate(k, b.target)
		if err != nil {
			return nil, err
		}
		mods[i] = m
	}
	return mods, nil
}

// generated caches PTX modules by kernel text: tile.Format prints every field of a kernel, so
// equal text means equal code. Autotuning compiles the same kernels many times.
var generated sync.Map // key -> *ptx.Module

// generatePTX is the code generator; a variable so tests can count or fail generations.
var generatePTX = ptx.Generate

func generate(k *tile.Kernel, t ptx.Target) (*ptx.Module, error) {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%s simt=%v sms=%d\n", t.Arch(), t.PTXVersion, t.SIMTOnly, t.SMs) + tile.Format(k)))
	key := hex.EncodeToString(h[:])
	if m, ok := generated.Load(key); ok {
		return m.(*ptx.Module), nil
	}
	m, err := generatePTX(k, t)
	if err != nil {
		return nil, err
	}
	if m == nil || m.Entry == "" || m.PTX == "" {
		return nil, errs.New(errs.Internal, "ptx: kernel %s: generator returned no module", k.Name)
	}
	generated.Store(key, m)
	return m, nil
}

// Stats is what a leak check compares before and after a workload.
type Stats struct {
	Alloc       AllocStats
	ModuleLoads int    // cuModuleLoadDataEx calls on this device
	Modules     int    // kernels loaded on this device
	DeviceFree  uint64 // cuMemGetInfo: free bytes on the device (all processes)
	DeviceTotal uint64
}

// Stats snapshots the device's allocator and module counters.
func (b *Backend) Stats() (Stats, error) {
	if err := b.Available(); err != nil {
		return Stats{}, err
	}
	var s Stats
	err := b.o.do(func() error {
		s = Stats{Alloc: b.o.mem.snapshot(), ModuleLoads: b.o.mods.loads, Modules: len(b.o.mods.byKey)}
		var err error
		s.DeviceFree, s.DeviceTotal, err = b.o.memInfo()
		return err
	})
	return s, err
}

// Trim returns the allocator's cached blocks to the driver.
func (b *Backend) Trim() error {
	if err := b.Available(); err != nil {
		return err
	}
	return b.o.do(b.o.mem.trim)
}

// localOrdinal is the device a process takes when none is named in code: $TESSERA_CUDA_DEVICE
// when set, else LOCAL_RANK (as torchrun and tessera-qa launch set it) modulo the ndev visible
// devices, so the ranks of a multi-GPU node spread over its GPUs and every rank of a one-GPU
// machine shares device 0; else 0.
func localOrdinal(getenv func(string) string, ndev int) (int, error) {
	if s := getenv("TESSERA_CUDA_DEVICE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, errs.New(errs.Input, "TESSERA_CUDA_DEVICE=%q is not a device number", s)
		}
		return n, nil
	}
	if s := getenv("LOCAL_RANK"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, errs.New(errs.Input, "LOCAL_RANK=%q is not a rank", s)
		}
		if ndev > 0 {
			return n % ndev, nil
		}
	}
	return 0, nil
}
