package nccl

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/internal/simgpu"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

var _ Device = (*simgpu.Device)(nil)

// The 2.28 header (src/nccl.h.in, ncclConfig_v22800): size_t then unsigned, unsigned, four
// ints, a pointer, two ints, a pointer, six ints.
func TestConfigLayoutIsNCCL228(t *testing.T) {
	var c config
	if s := unsafe.Sizeof(c); s != configBytes {
		t.Fatalf("sizeof(config) = %d, want %d", s, configBytes)
	}
	want := map[string]uintptr{"Size": 0, "Magic": 8, "Version": 12, "Blocking": 16, "CGAClusterSize": 20,
		"MinCTAs": 24, "MaxCTAs": 28, "NetName": 32, "SplitShare": 40, "TrafficClass": 44, "CommName": 48,
		"CollnetEnable": 56, "CTAPolicy": 60, "ShrinkShare": 64, "NvlsCTAs": 68, "NChannelsPerNetPeer": 72,
		"NvlinkCentricSched": 76}
	ty := reflect.TypeOf(c)
	if ty.NumField() != len(want) {
		t.Fatalf("%d fields, want %d", ty.NumField(), len(want))
	}
	for i := range ty.NumField() {
		f := ty.Field(i)
		if off, ok := want[f.Name]; !ok || f.Offset != off {
			t.Errorf("field %s at offset %d, want %d", f.Name, f.Offset, off)
		}
	}
	n := newConfig()
	if n.Size != 80 || n.Magic != 0xcafebeef || n.Version != 22800 || n.Blocking != math.MinInt32 ||
		n.NvlinkCentricSched != math.MinInt32 || n.NetName != 0 || n.CommName != 0 {
		t.Errorf("NCCL_CONFIG_INITIALIZER: %+v", n)
	}
	if unsafe.Sizeof(UniqueID{}) != 128 {
		t.Errorf("sizeof(ncclUniqueId) = %d", unsafe.Sizeof(UniqueID{}))
	}
}

func TestEnumsAndVersions(t *testing.T) {
	if ncclInProgress != 7 || ncclRemoteError != 6 || ncclInvalidUsage != 5 {
		t.Error("ncclResult_t values")
	}
	for dt, want := range map[numerics.DType]dataType{numerics.I8: 0, numerics.I32: 2, numerics.F16: 6, numerics.F32: 7,
		numerics.F64: 8, numerics.BF16: 9, numerics.F8E4M3: 10, numerics.F8E5M2: 11} {
		if got, ok := dataTypeOf(dt); !ok || got != want {
			t.Errorf("%s -> %d, want %d", dt, got, want)
		}
	}
	if _, ok := dataTypeOf(numerics.Bool); ok {
		t.Error("bool maps to an NCCL type")
	}
	for op, want := range map[dist.RedOp]redOp{dist.Sum: 0, dist.Max: 2, dist.Min: 3, dist.Avg: 4} {
		if got, ok := redOpOf(op); !ok || got != want {
			t.Errorf("%s -> %d, want %d", op, got, want)
		}
	}
	for code, want := range map[int]string{22809: "2.28.9", 21903: "2.19.3", 2708: "2.7.8"} {
		if got := versionString(code); got != want {
			t.Errorf("versionString(%d) = %s, want %s", code, got, want)
		}
	}
	if codeOf(ncclInvalidUsage, true) != errs.CommInit || codeOf(ncclRemoteError, false) != errs.TimeoutComm ||
		codeOf(ncclInvalidArgument, false) != errs.Input || codeOf(ncclInternalError, false) != errs.Internal {
		t.Error("codeOf")
	}
}

// purego.RegisterFunc checks every Go signature against its calling convention without
// calling anything: the 128-byte ncclUniqueId passed by value goes on the stack.
func TestBindRegistersEverySignature(t *testing.T) {
	addrs := map[string]uintptr{}
	look := func(name string) uintptr {
		if addrs[name] == 0 {
			addrs[name] = uintptr(0x1000 * (len(addrs) + 1))
		}
		return addrs[name]
	}
	a := &api{}
	if err := a.bind("libfake.so", look, purego.RegisterFunc); err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(a).Elem()
	for i := range v.NumField() {
		if v.Field(i).IsNil() {
			t.Errorf("api.%s not bound", v.Type().Field(i).Name)
		}
	}
	if len(a.bindings()) != v.NumField() {
		t.Errorf("%d bindings for %d fields", len(a.bindings()), v.NumField())
	}
}

func TestBindReportsMissingRequiredSymbols(t *testing.T) {
	look := func(name string) uintptr {
		if name == "ncclCommInitRankConfig" || name == "ncclAlltoAll" || name == "ncclCommFinalize" {
			return 0
		}
		return 0x1000
	}
	a := &api{}
	err := a.bind("libnccl.so.2", look, func(any, uintptr) {})
	if errs.CodeOf(err) != errs.Unsupported || !strings.Contains(err.Error(), "ncclCommInitRankConfig") ||
		strings.Contains(err.Error(), "ncclAlltoAll") {
		t.Fatalf("%v: want E_UNSUPPORTED naming ncclCommInitRankConfig only", err)
	}
}

// On this machine there may be no NCCL: the load reports it with a code, and the multicast
// switch is set either way.
func TestLoadSetsMulticastOffAndReportsACode(t *testing.T) {
	v, err := Version()
	if err != nil {
		if c := errs.CodeOf(err); c != errs.NoDevice && c != errs.Unsupported {
			t.Errorf("load: %v, want E_NO_DEVICE or E_UNSUPPORTED", err)
		}
		t.Logf("no NCCL here: %v", err)
	} else {
		t.Logf("NCCL %s", v)
	}
	if got := os.Getenv("NCCL_NVLS_ENABLE"); got != "0" {
		t.Errorf("NCCL_NVLS_ENABLE=%q after load, want 0", got)
	}
}

// fakeRun starts n ranks on simulated devices with the fake library.
func fakeRun(t *testing.T, n int, setup func(w *fakeWorld), opts Options, fn func(c *Comm, dev *simgpu.Device) error) ([]error, *fakeWorld) {
	t.Helper()
	node := simgpu.NewNode(0)
	w := newFakeWorld(node, n)
	if setup != nil {
		setup(w)
	}
	ts := dist.NewInproc(n)
	out := make([]error, n)
	var wg sync.WaitGroup
	devs := make([]*simgpu.Device, n)
	for r := range n {
		devs[r] = node.NewDevice(r, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var tr dist.Transport = ts[r]
			if n == 1 {
				tr = nil
			}
			c, err := newComm(context.Background(), w.api(r, devs[r]), devs[r], tr, opts)
			if err != nil {
				out[r] = err
				return
			}
			out[r] = fn(c, devs[r])
			if err := c.Close(context.Background()); err != nil && out[r] == nil {
				out[r] = err
			}
		}()
	}
	wg.Wait()
	for _, d := range devs {
		d.Stop()
	}
	if len(w.misuse) > 0 {
		t.Errorf("NCCL misuse: %s", strings.Join(w.misuse, "; "))
	}
	return out, w
}

type collCase struct {
	op      dist.Op
	red     dist.RedOp
	dt      numerics.DType
	count   int
	root    int
	inPlace bool
}

func (cc collCase) String() string {
	return fmt.Sprintf("%s/%s/%s/count%d/root%d/inplace=%v", cc.op, cc.dt, cc.red, cc.count, cc.root, cc.inPlace)
}

func (cc collCase) sizes(n int) (int, int) {
	switch cc.op {
	case dist.OpAllGather:
		return cc.count, n * cc.count
	case dist.OpReduceScatter, dist.OpAllToAll:
		if cc.op == dist.OpAllToAll {
			return n * cc.count, n * cc.count
		}
		return n * cc.count, cc.count
	}
	return cc.count, cc.count
}

func randomBytes(rng *rand.Rand, dt numerics.DType, count int) []byte {
	size := dt.Size()
	b := make([]byte, count*size)
	for i := range count {
		var v uint64
		switch {
		case rng.IntN(10) == 0:
			v = rng.Uint64()
		case dt.IsFloat():
			v = numerics.Encode(dt, rng.NormFloat64()*math.Pow(2, float64(rng.IntN(11)-5)))
		default:
			v = uint64(rng.IntN(2001) - 1000)
		}
		for k := range size {
			b[i*size+k] = byte(v >> (8 * k))
		}
	}
	return b
}

func hostRun(ctx context.Context, c *dist.Comm, cc collCase, send []byte, recvBytes int) ([]byte, error) {
	recv := make([]byte, recvBytes)
	var err error
	switch cc.op {
	case dist.OpAllReduce:
		err = c.AllReduce(ctx, cc.dt, send, recv, cc.red)
	case dist.OpReduceScatter:
		err = c.ReduceScatter(ctx, cc.dt, send, recv, cc.red)
	case dist.OpAllGather:
		err = c.AllGather(ctx, cc.dt, send, recv)
	case dist.OpBroadcast:
		err = c.Broadcast(ctx, cc.dt, send, recv, cc.root)
	case dist.OpAllToAll:
		err = c.AllToAll(ctx, cc.dt, send, recv)
	}
	return recv, err
}

func deviceRun(ctx context.Context, c *Comm, dev *simgpu.Device, cc collCase, send []byte, recvBytes int) ([]byte, error) {
	me, size := c.Rank(), cc.dt.Size()
	total := len(send) + recvBytes
	if cc.inPlace {
		total = max(len(send), recvBytes)
	}
	base, err := dev.Alloc(total)
	if err != nil {
		return nil, err
	}
	sendP, recvP := base, base+uint64(len(send))
	if cc.inPlace {
		sendP, recvP = base, base
		switch cc.op {
		case dist.OpAllGather:
			sendP = recvP + uint64(me*cc.count*size)
		case dist.OpReduceScatter:
			recvP = sendP + uint64(me*cc.count*size)
		}
	}
	if err := dev.Upload(ctx, sendP, send); err != nil {
		return nil, err
	}
	switch cc.op {
	case dist.OpAllReduce:
		err = c.AllReduce(ctx, cc.dt, sendP, recvP, cc.count, cc.red)
	case dist.OpReduceScatter:
		err = c.ReduceScatter(ctx, cc.dt, sendP, recvP, cc.count, cc.red)
	case dist.OpAllGather:
		err = c.AllGather(ctx, cc.dt, sendP, recvP, cc.count)
	case dist.OpBroadcast:
		err = c.Broadcast(ctx, cc.dt, sendP, recvP, cc.count, cc.root)
	case dist.OpAllToAll:
		err = c.AllToAll(ctx, cc.dt, sendP, recvP, cc.count)
	}
	if err != nil {
		return nil, err
	}
	if err := c.Synchronize(ctx); err != nil {
		return nil, err
	}
	out := make([]byte, recvBytes)
	if err := dev.Download(ctx, out, recvP); err != nil {
		return nil, err
	}
	return out, dev.Free(base)
}

func TestDeterministicBitsMatchHostOnFakeNCCL(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for _, noA2A := range []bool{false, true} {
			t.Run(fmt.Sprintf("world%d/alltoall-by-sendrecv=%v", n, noA2A), func(t *testing.T) {
				var cs []collCase
				for _, dt := range []numerics.DType{numerics.F32, numerics.BF16, numerics.F64, numerics.I32} {
					for _, count := range []int{0, 1, 7, 130} {
						for _, ip := range []bool{false, true} {
							for _, red := range []dist.RedOp{dist.Sum, dist.Max, dist.Avg} {
								cs = append(cs, collCase{op: dist.OpAllReduce, red: red, dt: dt, count: count, inPlace: ip})
							}
							cs = append(cs, collCase{op: dist.OpReduceScatter, red: dist.Sum, dt: dt, count: count, inPlace: ip},
								collCase{op: dist.OpAllGather, dt: dt, count: count, inPlace: ip},
								collCase{op: dist.OpBroadcast, dt: dt, count: count, root: n - 1, inPlace: ip},
								collCase{op: dist.OpAllToAll, dt: dt, count: count, inPlace: ip})
						}
					}
				}
				hosts := dist.NewInproc(n)
				hc := make([]*dist.Comm, n)
				for r := range n {
					hc[r] = dist.NewComm(hosts[r], dist.Options{})
				}
				out, _ := fakeRun(t, n, func(w *fakeWorld) { w.initPolls = 3; w.noAlltoAll = noA2A }, Options{}, func(c *Comm, dev *simgpu.Device) error {
					ctx := context.Background()
					rng := rand.New(rand.NewPCG(uint64(c.Rank()), 5))
					for _, cc := range cs {
						sn, rn := cc.sizes(n)
						send := randomBytes(rng, cc.dt, sn)
						want, err := hostRun(ctx, hc[c.Rank()], cc, send, rn*cc.dt.Size())
						if err != nil {
							return fmt.Errorf("host %s: %w", cc, err)
						}
						got, err := deviceRun(ctx, c, dev, cc, send, rn*cc.dt.Size())
						if err != nil {
							return fmt.Errorf("device %s: %w", cc, err)
						}
						if !bytes.Equal(got, want) {
							return fmt.Errorf("%s: device bits differ from the host's", cc)
						}
					}
					return nil
				})
				for r, err := range out {
					if err != nil {
						t.Errorf("rank %d: %v", r, err)
					}
				}
			})
		}
	}
}

func TestFastModeUsesNCCLAllReduce(t *testing.T) {
	out, _ := fakeRun(t, 3, nil, Options{Mode: dist.Fast}, func(c *Comm, dev *simgpu.Device) error {
		ctx := context.Background()
		vals := []float32{1, 2.5, -3}
		b := make([]byte, 12)
		for i, v := range vals {
			put32(b[4*i:], math.Float32bits(v*float32(c.Rank()+1)))
		}
		p, _ := dev.Alloc(12)
		if err := dev.Upload(ctx, p, b); err != nil {
			return err
		}
		if err := c.AllReduce(ctx, numerics.F32, p, p, 3, dist.Sum); err != nil {
			return err
		}
		if err := c.Synchronize(ctx); err != nil {
			return err
		}
		if err := dev.Download(ctx, b, p); err != nil {
			return err
		}
		for i, v := range vals {
			if got := math.Float32frombits(le32(b[4*i:])); got != 6*v {
				return fmt.Errorf("element %d: %g, want %g", i, got, 6*v)
			}
		}
		// Fast mode refuses what NCCL cannot reduce, before enqueueing anything.
		if err := c.AllReduce(ctx, numerics.Bool, p, p, 3, dist.Sum); errs.CodeOf(err) != errs.DType {
			return fmt.Errorf("bool: %v", err)
		}
		return dev.Free(p)
	})
	for r, err := range out {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestInitThatNeverCompletesIsCommInitAndAborts(t *testing.T) {
	start := time.Now()
	out, w := fakeRun(t, 2, func(w *fakeWorld) { w.hangInit = true }, Options{Timeout: 200 * time.Millisecond}, func(*Comm, *simgpu.Device) error { return nil })
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %s", time.Since(start))
	}
	for r, err := range out {
		if errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), "in progress") {
			t.Errorf("rank %d: %v, want E_COMM_INIT (still in progress)", r, err)
		}
	}
	if len(w.aborted) != 2 {
		t.Errorf("aborted ranks %v, want both", w.aborted)
	}
}

func TestAsyncErrorAbortsAndNamesIt(t *testing.T) {
	out, w := fakeRun(t, 2, nil, Options{Timeout: 2 * time.Second}, func(c *Comm, dev *simgpu.Device) error {
		ctx := context.Background()
		p, _ := dev.Alloc(64)
		if err := c.AllGather(ctx, numerics.F32, p, p, 8); err != nil {
			return err
		}
		if c.Rank() == 1 {
			c.a.ncclCommGetAsyncError = func(comm uintptr, st *result) result { *st = ncclRemoteError; return ncclSuccess }
		}
		err := c.Synchronize(ctx)
		if c.Rank() == 0 {
			// Rank 1 aborts and frees its buffer: if its stream had not run its half of the
			// collective yet, this rank's wait ends at the timeout, as E_TIMEOUT_COMM.
			if err != nil && errs.CodeOf(err) != errs.TimeoutComm {
				return fmt.Errorf("rank 0 synchronize: %v, want nil or E_TIMEOUT_COMM", err)
			}
			return nil
		}
		_ = dev.Free(p)
		if errs.CodeOf(err) != errs.TimeoutComm || !strings.Contains(err.Error(), "ncclRemoteError") {
			return fmt.Errorf("synchronize: %v, want E_TIMEOUT_COMM with ncclRemoteError", err)
		}
		if again := c.AllGather(ctx, numerics.F32, p, p, 8); again == nil {
			return fmt.Errorf("an aborted communicator accepted work")
		}
		return nil
	})
	for r, err := range out {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if len(w.aborted) == 0 || w.aborted[0] != 1 {
		t.Errorf("aborted %v, want rank 1 first", w.aborted)
	}
}

func TestMismatchedCallsAreDesync(t *testing.T) {
	out, _ := fakeRun(t, 3, nil, Options{Timeout: 2 * time.Second}, func(c *Comm, dev *simgpu.Device) error {
		p, _ := dev.Alloc(4 * 64)
		count := 10
		if c.Rank() == 1 {
			count = 11
		}
		err := c.AllReduce(context.Background(), numerics.F32, p, p, count, dist.Sum)
		_ = dev.Free(p)
		return err
	})
	for r, err := range out {
		if errs.CodeOf(err) != errs.Desync {
			t.Errorf("rank %d: %v, want E_DESYNC", r, err)
		}
	}
}

// A refusal at the call (NCCL's answer to two ranks on one GPU, for instance) is E_COMM_INIT
// carrying NCCL's own message, and nothing is left to abort.
func TestInitRefusedAtTheCallIsCommInitWithNCCLsMessage(t *testing.T) {
	node := simgpu.NewNode(0)
	w := newFakeWorld(node, 1)
	dev := node.NewDevice(0, 1)
	defer dev.Stop()
	a := w.api(0, dev)
	a.ncclCommInitRankConfig = func(comm *uintptr, nranks int32, id UniqueID, r int32, cfg *config) result {
		return ncclInvalidUsage
	}
	_, err := newComm(context.Background(), a, dev, nil, Options{Timeout: time.Second})
	if errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), "ncclInvalidUsage") || !strings.Contains(err.Error(), "fake last error") {
		t.Fatalf("%v: want E_COMM_INIT with ncclInvalidUsage and NCCL's last error", err)
	}
	if strings.Count(err.Error(), "E_COMM_INIT") != 1 {
		t.Errorf("code repeated: %v", err)
	}
}
