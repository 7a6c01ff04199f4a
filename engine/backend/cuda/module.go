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

// CUjit_option, CUjitInputType and CUfunction_attribute values (cuda.h).
const (
	jitErrorLogBuffer     = 5
	jitErrorLogBufferSize = 6
	jitInputPTX           = 1

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
	loads int // cuModuleLoadData calls, for tests and stats
}

func newModuleTable() *moduleTable { return &moduleTable{byKey: map[string]*kernelFn{}} }

// ptxDigest identifies PTX text.
func ptxDigest(ptx string) string {
	s := sha256.Sum256([]byte(ptx))
	return hex.EncodeToString(s[:])
}

// function returns the loaded kernel entry of ptx, linking (or reading the disk cache) and
// loading on first use. Owner thread only.
func (o *owner) function(ptx, entry string, cache *cubinCache, driver int) (*kernelFn, error) {
	key := ptxDigest(ptx) + "/" + entry
	if k, ok := o.mods.byKey[key]; ok {
		return k, nil
	}
	k, err := o.load(ptx, entry, cache, driver)
	if err != nil {
		return nil, err
	}
	o.mods.byKey[key] = k
	return k, nil
}

// load links ptx (through the disk cache) and loads the cubin. A cached cubin that the driver
// refuses is dropped and rebuilt once: the key should make that impossible, but a cache copied
// between machines must not wedge the backend.
func (o *owner) load(ptx, entry string, cache *cubinCache, driver int) (*kernelFn, error) {
	arch := o.info.Arch()
	l := &driverLinker{o: o, entry: entry}
	cubin, hit, err := cache.get(ptx, arch, driver, l)
	if err != nil {
		return nil, err
	}
	mod, err := o.loadImage(cubin, entry)
	if err != nil && hit {
		cache.invalidate(ptx, arch, driver)
		if cubin, _, err = cache.get(ptx, arch, driver, l); err != nil {
			return nil, err
		}
		mod, err = o.loadImage(cubin, entry)
	}
	if err != nil {
		return nil, err
	}
	k := &kernelFn{mod: mod, entry: entry, dynShared: defaultDynamicSharedLimit}
	if err := o.a.check(o.a.cuModuleGetFunction(&k.fn, mod, entry), "%s: kernel %s: cuModuleGetFunction", o.where(), entry); err != nil {
		_ = o.a.cuModuleUnload(mod)
		return nil, err
	}
	var regs, local int32
	if o.a.cuFuncGetAttribute(&regs, funcAttrNumRegs, k.fn) == cudaSuccess {
		k.regs = int(regs)
	}
	if o.a.cuFuncGetAttribute(&local, funcAttrLocalSizeBytes, k.fn) == cudaSuccess {
		k.localBytes = int(local)
	}
	return k, nil
}

func (o *owner) loadImage(cubin []byte, entry string) (uintptr, error) {
	if len(cubin) == 0 {
		return 0, errs.New(errs.Internal, "%s: kernel %s: empty cubin", o.where(), entry)
	}
	var mod uintptr
	o.mods.loads++
	err := o.a.check(o.a.cuModuleLoadData(&mod, unsafe.Pointer(&cubin[0])), "%s: kernel %s: cuModuleLoadData (%d-byte cubin)", o.where(), entry, len(cubin))
	runtime.KeepAlive(cubin)
	return mod, err
}

// driverLinker links PTX with the driver's JIT (cuLink*) into a cubin, so the result can be
// cached on disk; cuModuleLoadData on PTX would JIT again in every process.
type driverLinker struct {
	o     *owner
	entry string // for messages only
}

func (l *driverLinker) link(ptx string) ([]byte, error) {
	a, where := l.o.a, l.o.where()
	logBuf := make([]byte, jitLogBytes)
	src := append([]byte(ptx), 0)
	// The option values are a void* array holding the log buffer's address and its size. The
	// driver keeps both arrays and writes the log (and the log's length, into vals) during
	// AddData and Complete, so all three stay pinned until Destroy: the Unpin is deferred
	// before the Destroy, so it runs after it.
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSize}
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
	var pin runtime.Pinner
	pin.Pin(&logBuf[0])
	pin.Pin(&opts[0])
	pin.Pin(&vals[0])
	defer pin.Unpin()

	var state uintptr
	if err := a.check(a.cuLinkCreate(uint32(len(opts)), &opts[0], &vals[0], &state), "%s: kernel %s: cuLinkCreate", where, l.entry); err != nil {
		return nil, err
	}
	defer a.cuLinkDestroy(state)
	r := a.cuLinkAddData(state, jitInputPTX, unsafe.Pointer(&src[0]), uint64(len(src)), l.entry+".ptx", 0, nil, nil)
	if r != cudaSuccess {
		return nil, l.jitError(r, "cuLinkAddData", logBuf)
	}
	var out unsafe.Pointer
	var size uint64
	if r := a.cuLinkComplete(state, &out, &size); r != cudaSuccess {
		return nil, l.jitError(r, "cuLinkComplete", logBuf)
	}
	// The cubin belongs to the link state: copy it out before Destroy frees it.
	cubin := append([]byte(nil), unsafe.Slice((*byte)(out), int(size))...)
	runtime.KeepAlive(src)
	return cubin, nil
}

// jitError reports a JIT failure with the first part of ptxas's log on the same line.
func (l *driverLinker) jitError(r cuResult, call string, logBuf []byte) error {
	log := string(logBuf)
	if i := strings.IndexByte(log, 0); i >= 0 {
		log = log[:i]
	}
	log = strings.Join(strings.Fields(log), " ")
	if len(log) > maxLogInMessage {
		log = log[:maxLogInMessage] + "..."
	}
	err := l.o.a.cuError(r, "%s: kernel %s: %s", l.o.where(), l.entry, call)
	if log == "" {
		return err
	}
	var ce *errs.Error
	if errors.As(err, &ce) {
		ce.Msg += "; JIT log: " + log
	}
	return err
}
