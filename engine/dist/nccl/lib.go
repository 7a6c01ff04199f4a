// Package nccl is the `nccl` transport: NCCL (libnccl.so.2) through purego, so binaries
// still build with CGO_ENABLED=0 and report E_NO_DEVICE where the library is missing.
//
// NCCL moves bytes; the engine adds. In deterministic mode a reduction is a data-only
// exchange (grouped ncclSend/ncclRecv: every rank receives every rank's contribution to its
// chunk) followed by the fixed-order reduction kernel of engine/dist/devreduce, then an
// all-gather of the reduced chunks, so the bits equal the host transports' and the cuda
// transport's. ncclAllReduce and ncclReduceScatter run only in fast mode, whose results say
// that bits are not guaranteed.
//
// Every wait is bounded. The communicator is created non-blocking (config.blocking = 0) and
// its state polled with ncclCommGetAsyncError until it leaves ncclInProgress, with a deadline;
// Synchronize polls the stream and the communicator's asynchronous error together. A timeout
// or an error aborts the communicator (ncclCommAbort) and reports E_COMM_INIT (setup) or
// E_TIMEOUT_COMM (a collective), naming the rank.
//
// NVLink multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0 is set in the environment before the
// library loads (a program that uses multicast can put shared GPUs out of service).
package nccl

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// result is ncclResult_t (nccl.h): an int-sized enum.
type result int32

// ncclResult_t values (NCCL 2.28; ncclTimeout is 2.29's addition, harmless to name).
const (
	ncclSuccess            result = 0
	ncclUnhandledCudaError result = 1
	ncclSystemError        result = 2
	ncclInternalError      result = 3
	ncclInvalidArgument    result = 4
	ncclInvalidUsage       result = 5
	ncclRemoteError        result = 6
	ncclInProgress         result = 7
	ncclTimeout            result = 8
)

var resultNames = map[result]string{
	ncclSuccess: "ncclSuccess", ncclUnhandledCudaError: "ncclUnhandledCudaError", ncclSystemError: "ncclSystemError",
	ncclInternalError: "ncclInternalError", ncclInvalidArgument: "ncclInvalidArgument", ncclInvalidUsage: "ncclInvalidUsage",
	ncclRemoteError: "ncclRemoteError", ncclInProgress: "ncclInProgress", ncclTimeout: "ncclTimeout",
}

// dataType is ncclDataType_t.
type dataType int32

const (
	ncclInt8     dataType = 0
	ncclUint8    dataType = 1
	ncclInt32    dataType = 2
	ncclFloat16  dataType = 6
	ncclFloat32  dataType = 7
	ncclFloat64  dataType = 8
	ncclBfloat16 dataType = 9
	ncclFloat8e4 dataType = 10
	ncclFloat8e5 dataType = 11
)

// redOp is ncclRedOp_t.
type redOp int32

const (
	ncclSum redOp = 0
	ncclMax redOp = 2
	ncclMin redOp = 3
	ncclAvg redOp = 4
)

// dataTypeOf maps an engine dtype to NCCL's for the reductions of fast mode (data-only
// collectives move bytes as ncclUint8 whatever the dtype).
func dataTypeOf(dt numerics.DType) (dataType, bool) {
	switch dt {
	case numerics.I8:
		return ncclInt8, true
	case numerics.I32:
		return ncclInt32, true
	case numerics.F16:
		return ncclFloat16, true
	case numerics.F32:
		return ncclFloat32, true
	case numerics.F64:
		return ncclFloat64, true
	case numerics.BF16:
		return ncclBfloat16, true
	case numerics.F8E4M3:
		return ncclFloat8e4, true
	case numerics.F8E5M2:
		return ncclFloat8e5, true
	}
	return 0, false
}

func redOpOf(op dist.RedOp) (redOp, bool) {
	switch op {
	case dist.Sum:
		return ncclSum, true
	case dist.Max:
		return ncclMax, true
	case dist.Min:
		return ncclMin, true
	case dist.Avg:
		return ncclAvg, true
	}
	return 0, false
}

// UniqueID is ncclUniqueId: NCCL_UNIQUE_ID_BYTES (128) opaque bytes, passed by value.
type UniqueID struct{ Internal [128]byte }

// config is ncclConfig_t as NCCL 2.28 lays it out (ncclConfig_v22800, 80 bytes on 64-bit
// hosts). NCCL reads `size` bytes of it and treats fields its `version` predates as unset, so
// the 2.28 layout is also what newer libraries accept (they default the fields added later).
type config struct {
	Size                uint64 // size_t: sizeof(ncclConfig_t)
	Magic               uint32 // NCCL_API_MAGIC 0xcafebeef
	Version             uint32 // NCCL_VERSION(2, 28, 0)
	Blocking            int32
	CGAClusterSize      int32
	MinCTAs             int32
	MaxCTAs             int32
	NetName             uintptr // const char*
	SplitShare          int32
	TrafficClass        int32
	CommName            uintptr // const char*
	CollnetEnable       int32
	CTAPolicy           int32
	ShrinkShare         int32
	NvlsCTAs            int32
	NChannelsPerNetPeer int32
	NvlinkCentricSched  int32
}

const (
	configMagic    = 0xcafebeef
	configVersion  = 22800       // NCCL_VERSION(2,28,0) = 2*10000 + 28*100 + 0
	configUndefInt = -2147483648 // NCCL_CONFIG_UNDEF_INT (INT_MIN)
	configBytes    = 80
)

// newConfig is NCCL_CONFIG_INITIALIZER for the 2.28 layout: every attribute unset.
func newConfig() config {
	u := int32(configUndefInt)
	return config{Size: uint64(unsafe.Sizeof(config{})), Magic: configMagic, Version: configVersion,
		Blocking: u, CGAClusterSize: u, MinCTAs: u, MaxCTAs: u, SplitShare: u, TrafficClass: u,
		CollnetEnable: u, CTAPolicy: u, ShrinkShare: u, NvlsCTAs: u, NChannelsPerNetPeer: u, NvlinkCentricSched: u}
}

// versionString spells ncclGetVersion's code: X*10000+Y*100+Z from 2.9 on, X*1000+Y*100+Z
// before.
func versionString(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
}

// api is the part of NCCL the transport uses. Pointers are device addresses (uint64); comm and
// stream handles are uintptr; size_t counts are uint64.
type api struct {
	ncclGetVersion         func(v *int32) result
	ncclGetUniqueId        func(id *UniqueID) result
	ncclCommInitRankConfig func(comm *uintptr, nranks int32, id UniqueID, rank int32, cfg *config) result
	ncclCommGetAsyncError  func(comm uintptr, state *result) result
	ncclCommAbort          func(comm uintptr) result
	ncclCommDestroy        func(comm uintptr) result
	ncclGetErrorString     func(r result) string
	ncclAllReduce          func(send, recv, count uint64, dt dataType, op redOp, comm, stream uintptr) result
	ncclReduceScatter      func(send, recv, recvcount uint64, dt dataType, op redOp, comm, stream uintptr) result
	ncclAllGather          func(send, recv, sendcount uint64, dt dataType, comm, stream uintptr) result
	ncclBroadcast          func(send, recv, count uint64, dt dataType, root int32, comm, stream uintptr) result
	ncclSend               func(send, count uint64, dt dataType, peer int32, comm, stream uintptr) result
	ncclRecv               func(recv, count uint64, dt dataType, peer int32, comm, stream uintptr) result
	ncclGroupStart         func() result
	ncclGroupEnd           func() result

	// Optional (nil when the library lacks them).
	ncclCommFinalize func(comm uintptr) result
	ncclGetLastError func(comm uintptr) string
	ncclAlltoAll     func(send, recv, count uint64, dt dataType, comm, stream uintptr) result
}

type binding struct {
	fn       any
	name     string
	optional bool
}

func (a *api) bindings() []binding {
	return []binding{
		{&a.ncclGetVersion, "ncclGetVersion", false},
		{&a.ncclGetUniqueId, "ncclGetUniqueId", false},
		{&a.ncclCommInitRankConfig, "ncclCommInitRankConfig", false},
		{&a.ncclCommGetAsyncError, "ncclCommGetAsyncError", false},
		{&a.ncclCommAbort, "ncclCommAbort", false},
		{&a.ncclCommDestroy, "ncclCommDestroy", false},
		{&a.ncclGetErrorString, "ncclGetErrorString", false},
		{&a.ncclAllReduce, "ncclAllReduce", false},
		{&a.ncclReduceScatter, "ncclReduceScatter", false},
		{&a.ncclAllGather, "ncclAllGather", false},
		{&a.ncclBroadcast, "ncclBroadcast", false},
		{&a.ncclSend, "ncclSend", false},
		{&a.ncclRecv, "ncclRecv", false},
		{&a.ncclGroupStart, "ncclGroupStart", false},
		{&a.ncclGroupEnd, "ncclGroupEnd", false},
		{&a.ncclCommFinalize, "ncclCommFinalize", true},
		{&a.ncclGetLastError, "ncclGetLastError", true},
		{&a.ncclAlltoAll, "ncclAlltoAll", true},
	}
}

// bind resolves every binding through look; all missing required names come back in one
// E_UNSUPPORTED error (an NCCL too old for non-blocking init, 2.14, is the usual cause).
func (a *api) bind(lib string, look func(string) uintptr, register func(fn any, addr uintptr)) error {
	var missing []string
	for _, b := range a.bindings() {
		addr := look(b.name)
		if addr == 0 {
			if !b.optional {
				missing = append(missing, b.name)
			}
			continue
		}
		register(b.fn, addr)
	}
	if len(missing) > 0 {
		return errs.New(errs.Unsupported, "NCCL %s lacks %s (NCCL 2.14 or newer is needed)", lib, strings.Join(missing, ", "))
	}
	return nil
}

// LibName is NCCL's soname.
const LibName = "libnccl.so.2"

// EnvLib names another NCCL library file to load instead (a full path).
const EnvLib = "TESSERA_NCCL_LIB"

var (
	loadOnce sync.Once
	loaded   *api
	loadErr  error
	version  int
)

// load dlopens NCCL once per process, after turning NVLink multicast off.
func load() (*api, error) {
	loadOnce.Do(func() {
		if err := multicastOff(); err != nil {
			loadErr = err
			return
		}
		name := LibName
		if p := os.Getenv(EnvLib); p != "" {
			name = p
		}
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			loadErr = errs.New(errs.NoDevice, "no NCCL: cannot load %s (%v)", name, err)
			return
		}
		a := &api{}
		look := func(s string) uintptr {
			addr, err := purego.Dlsym(h, s)
			if err != nil {
				return 0
			}
			return addr
		}
		if err := a.bind(name, look, purego.RegisterFunc); err != nil {
			loadErr = err
			return
		}
		var v int32
		if r := a.ncclGetVersion(&v); r != ncclSuccess {
			loadErr = a.errorf(errs.Unsupported, r, "ncclGetVersion")
			return
		}
		version = int(v)
		loaded = a
	})
	return loaded, loadErr
}

// Version loads NCCL and returns its version, e.g. "2.28.9".
func Version() (string, error) {
	if _, err := load(); err != nil {
		return "", err
	}
	return versionString(version), nil
}

// multicastOff sets NCCL_NVLS_ENABLE=0 in the process environment (libc's, which NCCL
// reads: purego's runtime forwards os.Setenv to setenv). A different value is overridden,
// not honoured: multicast can take a shared machine's GPUs out of service.
func multicastOff() error {
	if os.Getenv("NCCL_NVLS_ENABLE") == "0" {
		return nil
	}
	if err := os.Setenv("NCCL_NVLS_ENABLE", "0"); err != nil {
		return errs.New(errs.Internal, "cannot set NCCL_NVLS_ENABLE=0: %v", err)
	}
	return nil
}

// name spells a result.
func (a *api) name(r result) string {
	s := resultNames[r]
	if s == "" {
		s = fmt.Sprintf("ncclResult %d", int32(r))
	}
	if a != nil && a.ncclGetErrorString != nil {
		if d := a.ncclGetErrorString(r); d != "" && d != s {
			s += " (" + d + ")"
		}
	}
	return s
}

// codeOf maps a result to the code users see, given what failed: setup or a collective.
func codeOf(r result, setup bool) errs.Code {
	switch {
	case setup:
		return errs.CommInit
	case r == ncclInvalidArgument:
		return errs.Input
	case r == ncclInvalidUsage:
		return errs.Unsupported
	case r == ncclSystemError || r == ncclRemoteError || r == ncclTimeout:
		return errs.TimeoutComm
	}
	return errs.Internal
}

// errorf is the one-line error for a failed call.
func (a *api) errorf(code errs.Code, r result, format string, args ...any) error {
	return errs.New(code, "%s: %s", fmt.Sprintf(format, args...), a.name(r))
}
