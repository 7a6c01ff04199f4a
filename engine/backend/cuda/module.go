package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"runtime"
	"strings"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// CUjit_option and CUfunction_attribute values (cuda.h).
const (
	jitErrorLogBuffer     = 5
	jitErrorLogBufferSize = 6

	funcAttrLocalSizeBytes    = 3
	funcAttrNumRegs           = 4
	funcAttrMaxDynamicShared  = 8
	defaultDynamicSharedLimit = 48 << 10
	jitLogBytes               = 16 << 10
	maxLogInMessage           = 600
)

// kernelFn is a loaded kernel: its module and function handles and what the launcher needs.
type kernelFn struct {
	mod, fn    uintptr
	entry      string
	dynShared  int // current CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	regs       int // registers per thread (ptxas's choice)
	localBytes int // local memory per thread: non-zero means register spills
}

// moduleTable is the owner's in-memory module cache, keyed by PTX digest and entry name.
// Only the owner thread touches it.
type moduleTable struct {
	byKey map[string]*kernelFn
	loads int // cuModuleLoadDataEx calls, for tests and stats
}

func newModuleTable() *moduleTable { return &moduleTable{byKey: map[string]*kernelFn{}} }

// ptxDigest identifies PTX text.
func ptxDigest(ptx string) string {
	s := sha256.Sum256([]byte(ptx))
	return hex.EncodeToString(s[:])
}

// function returns the loaded kernel entry of ptx, compiling and loading it on first use.
// Owner thread only.
func (o *owner) function(ptx, entry string) (*kernelFn, error) {
	key := ptxDigest(ptx) + "/" + entry
	if k, ok := o.mods.byKey[key]; ok {
		return k, nil
	}
	k, err := o.load(ptx, entry)
	if err != nil {
		return nil, err
	}
	o.mods.byKey[key] = k
	return k, nil
}

// load JIT-compiles ptx with cuModuleLoadDataEx and looks up entry. The PTX goes to the driver
// whole: a PTX added through cuLinkAddData is compiled as relocatable device code (-rdc), which
// cost the attention kernel 10-40% (docs/PERF.md), so there is no linker step and no cubin of
// our own to keep. The driver caches what it compiles on disk (its JIT cache, keyed by the PTX,
// the device and the driver; CUDA_CACHE_PATH, CUDA_CACHE_DISABLE), so a second process does not
// compile again.
func (o *owner) load(ptx, entry string) (*kernelFn, error) {
	a, where := o.a, o.where()
	logBuf := make([]byte, jitLogBytes)
	src := append([]byte(ptx), 0)
	// The option values are a void* array holding the log buffer's address and its size; the
	// driver writes the log during the call.
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSize}
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
	var pin runtime.Pinner
	pin.Pin(&logBuf[0])
	pin.Pin(&opts[0])
	pin.Pin(&vals[0])
	pin.Pin(&src[0])
	defer pin.Unpin()
	var mod uintptr
	o.mods.loads++
	if r := a.cuModuleLoadDataEx(&mod, unsafe.Pointer(&src[0]), uint32(len(opts)), &opts[0], &vals[0]); r != cudaSuccess {
		return nil, o.jitError(r, entry, "cuModuleLoadDataEx", logBuf)
	}
	k := &kernelFn{mod: mod, entry: entry, dynShared: defaultDynamicSharedLimit}
	if err := a.check(a.cuModuleGetFunction(&k.fn, mod, entry), "%s: kernel %s: cuModuleGetFunction", where, entry); err != nil {
		_ = a.cuModuleUnload(mod)
		return nil, err
	}
	var regs, local int32
	if a.cuFuncGetAttribute(&regs, funcAttrNumRegs, k.fn) == cudaSuccess {
		k.regs = int(regs)
	}
	if a.cuFuncGetAttribute(&local, funcAttrLocalSizeBytes, k.fn) == cudaSuccess {
		k.localBytes = int(local)
	}
	return k, nil
}

// jitError reports a JIT failure with the first part of ptxas's log on the same line.
func (o *owner) jitError(r cuResult, entry, call string, logBuf []byte) error {
	log := string(logBuf)
	if i := strings.IndexByte(log, 0); i >= 0 {
		log = log[:i]
	}
	log = strings.Join(strings.Fields(log), " ")
	if len(log) > maxLogInMessage {
		log = log[:maxLogInMessage] + "..."
	}
	err := o.a.cuError(r, "%s: kernel %s: %s", o.where(), entry, call)
	if log == "" {
		return err
	}
	var ce *errs.Error
	if errors.As(err, &ce) {
		ce.Msg += "; JIT log: " + log
	}
	return err
}
