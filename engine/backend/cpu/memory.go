package cpu

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// The CPU backend's memory budget is what device memory is to the CUDA backend: a process may
// cap the bytes its runs hold at once (TESSERA_CPU_MEM_LIMIT, SetMemLimit). A run that would
// pass the cap fails with E_OOM before it allocates, so a host shared with other work (a
// container's memory limit) gets a coded error from the engine instead of the kernel's OOM
// killer, and the stress runner's OOM pressure can drive the same E_OOM-then-recover path on
// the CPU that it drives on a GPU. Without a limit nothing is refused; the bytes in use are
// counted either way.
//
// Counted: the bytes of a run's buffers and of its output copies (what grows with the graph),
// for as long as the run lasts; not the interpreter's registers. Alloc takes budget for a
// caller that holds host memory beside the runs (the stress runner's memory hog).

// EnvMemLimit names the environment variable that sets the budget at start-up: bytes, or a
// number with a KiB, MiB or GiB suffix. 0 or unset: no limit.
const EnvMemLimit = "TESSERA_CPU_MEM_LIMIT"

var budget struct {
	mu     sync.Mutex
	limit  int64 // 0: no limit
	used   int64
	envErr error // a TESSERA_CPU_MEM_LIMIT that does not parse: every run reports it
}

func init() {
	if v := os.Getenv(EnvMemLimit); v != "" {
		n, err := ParseBytes(v)
		if err != nil {
			budget.envErr = errs.New(errs.Input, "%s=%q: %v", EnvMemLimit, v, err)
		}
		budget.limit = n
	}
}

// ParseBytes reads "1048576", "64MiB", "512KiB" or "2GiB".
func ParseBytes(s string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, errs.New(errs.Input, "not a byte count (want N, NKiB, NMiB or NGiB)")
	}
	return n * mult, nil
}

// SetMemLimit sets the process's budget in bytes (0: no limit) and returns the previous one.
// Runs already holding more keep their memory; the next reservation is refused.
func SetMemLimit(n int64) int64 {
	budget.mu.Lock()
	defer budget.mu.Unlock()
	prev := budget.limit
	budget.limit, budget.envErr = max(n, 0), nil
	return prev
}

// MemInUse is the bytes runs and Alloc blocks hold now; MemLimit the budget (0: none).
func MemInUse() int64 {
	budget.mu.Lock()
	defer budget.mu.Unlock()
	return budget.used
}

func MemLimit() int64 {
	budget.mu.Lock()
	defer budget.mu.Unlock()
	return budget.limit
}

// reserve takes n bytes of the budget for what (named in the E_OOM), or refuses.
func reserve(n int64, what string) error {
	budget.mu.Lock()
	defer budget.mu.Unlock()
	if budget.envErr != nil {
		return budget.envErr
	}
	if budget.limit > 0 && budget.used+n > budget.limit {
		return errs.New(errs.OOM, "cpu: %s needs %d bytes; %d of the %d-byte budget in use (%s)", what, n, budget.used, budget.limit, EnvMemLimit)
	}
	budget.used += n
	return nil
}

func unreserve(n int64) {
	budget.mu.Lock()
	budget.used -= n
	budget.mu.Unlock()
}

// Block is host memory taken through the budget by Alloc; Free gives it back.
type Block struct {
	Data []byte
	once sync.Once
}

// Alloc returns n bytes counted against the budget, every page touched so that the memory is
// resident (as device memory is once allocated), or E_OOM when the budget cannot hold them.
func Alloc(n int) (*Block, error) {
	if n < 0 {
		return nil, errs.New(errs.Input, "cpu: alloc of %d bytes", n)
	}
	if err := reserve(int64(n), "alloc of "+strconv.Itoa(n)+" bytes"); err != nil {
		return nil, err
	}
	b := &Block{Data: make([]byte, n)}
	for p := 0; p < n; p += 4096 {
		b.Data[p] = 1
	}
	return b, nil
}

// Free returns the block's bytes to the budget; a second Free does nothing. The memory itself
// goes back to the Go heap when the block is no longer referenced.
func (b *Block) Free() {
	b.once.Do(func() {
		unreserve(int64(len(b.Data)))
		b.Data = nil
	})
}
