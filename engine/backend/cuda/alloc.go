package cuda

import (
	"math/bits"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// devMem is raw device memory: the driver on a GPU, a fake in tests.
type devMem interface {
	alloc(n uint64) (uint64, error)
	free(p uint64) error
	memset(p uint64, v byte, n uint64) error
}

// AllocStats counts what the caching allocator did; leak checks compare two snapshots.
type AllocStats struct {
	LiveBlocks   int    // handed out and not yet freed
	LiveBytes    uint64 // their size-class bytes
	CachedBlocks int    // freed, kept for reuse
	CachedBytes  uint64
	DriverAllocs int // cuMemAlloc calls that succeeded
	DriverFrees  int // cuMemFree calls
	Reuses       int // blocks served from the cache
	Poisoned     int // blocks filled with 0xFF before being handed out
}

// poisonByte fills blocks in poison mode: 0xFF bytes are NaN in f64, f32, f16, bf16 and both
// fp8 formats, -1 in int8/int32 and an invalid bool.
const poisonByte = 0xFF

// allocator is a caching allocator over devMem. Freed blocks go to a free list per size class
// and are handed out again without a driver call, because cuMemAlloc/cuMemFree synchronise
// the device and cost far more than small kernels.
//
// Why reuse cannot change results: a program's input buffers are copied in completely before
// any kernel runs, and every output or intermediate buffer is written completely by the
// kernels (every Tile IR store covers its buffer; masked lanes are outside it). So no kernel
// reads a byte that the previous owner of the block left behind. Poison mode checks that
// claim: every block handed out is first filled with 0xFF, so a byte no kernel wrote reads as
// NaN (or -1) and fails any comparison. Tests run in poison mode.
//
// Methods are safe for concurrent use; devMem calls happen under the lock, so for the driver
// they must be made on the owner thread (they are: the owner calls them inside do).
type allocator struct {
	mu     sync.Mutex
	m      devMem
	poison bool
	exact  bool                // every block at its requested size, straight from the driver
	free   map[uint64][]uint64 // size class -> cached blocks
	live   map[uint64]block    // pointer -> block
	stats  AllocStats
}

type block struct {
	size  uint64
	exact bool // allocated at the requested size after an OOM: returned to the driver on free
}

func newAllocator(m devMem) *allocator {
	return &allocator{m: m, free: map[uint64][]uint64{}, live: map[uint64]block{}}
}

// minClass keeps every block 512-byte aligned and sized (cuMemAlloc aligns to 256).
const minClass = 512

// sizeClass rounds n up to the next of four steps per power of two (512, 640, 768, 896, 1024,
// 1280, ...), so a cached block wastes at most a quarter of its size.
func sizeClass(n uint64) uint64 {
	if n <= minClass {
		return minClass
	}
	e := bits.Len64(n-1) - 1 // 2^e < n <= 2^(e+1)
	step := uint64(1) << (e - 2)
	return (n + step - 1) / step * step
}

// setExact turns exact mode on or off. In exact mode every block is a driver allocation of
// the requested size (at least one byte) that goes back to the driver when released, so a
// memory checker that knows the driver's allocations (compute-sanitizer's memcheck and
// initcheck) sees an access one byte past a buffer, which a size class's slack would hide,
// and never sees bytes a previous owner of a cached block wrote. Slow (a driver call per
// buffer): for the sanitizer runs (TESSERA_CUDA_EXACT_ALLOC), never the default.
func (al *allocator) setExact(on bool) {
	al.mu.Lock()
	al.exact = on
	al.mu.Unlock()
}

// setPoison turns poison mode on or off.
func (al *allocator) setPoison(on bool) {
	al.mu.Lock()
	al.poison = on
	al.mu.Unlock()
}

// alloc returns a block of at least n bytes.
func (al *allocator) alloc(n uint64) (uint64, error) {
	al.mu.Lock()
	defer al.mu.Unlock()
	c := sizeClass(max(n, 1))
	var p uint64
	b := block{size: c}
	if al.exact {
		b = block{size: max(n, 1), exact: true}
		var err error
		if p, err = al.m.alloc(b.size); err != nil {
			return 0, err
		}
		al.stats.DriverAllocs++
	} else if l := al.free[c]; len(l) > 0 {
		p = l[len(l)-1]
		al.free[c] = l[:len(l)-1]
		al.stats.CachedBlocks--
		al.stats.CachedBytes -= c
		al.stats.Reuses++
	} else {
		var err error
		p, err = al.m.alloc(c)
		if errs.CodeOf(err) == errs.OOM {
			// Cached blocks of other sizes may be what is missing: return them and retry,
			// then try the exact size, which a nearly full device may still have.
			if terr := al.trimLocked(); terr != nil {
				return 0, terr
			}
			if p, err = al.m.alloc(c); errs.CodeOf(err) == errs.OOM && max(n, 1) < c {
				b = block{size: max(n, 1), exact: true} // the driver refuses 0 bytes
				p, err = al.m.alloc(b.size)
			}
		}
		if err != nil {
			return 0, err
		}
		al.stats.DriverAllocs++
	}
	if al.poison {
		if err := al.m.memset(p, poisonByte, b.size); err != nil {
			_ = al.m.free(p) // the memset error is the one to report
			al.stats.DriverFrees++
			return 0, errs.Wrap(errs.Internal, err, "cuda allocator: poisoning a %d-byte block", b.size)
		}
		al.stats.Poisoned++
	}
	al.live[p] = b
	al.stats.LiveBlocks++
	al.stats.LiveBytes += b.size
	return p, nil
}

// release returns a block to its free list. Releasing a pointer that is not live (a double
// free, a foreign pointer) is an internal error, never silently ignored.
func (al *allocator) release(p uint64) error {
	al.mu.Lock()
	defer al.mu.Unlock()
	b, ok := al.live[p]
	if !ok {
		return errs.New(errs.Internal, "cuda allocator: free of 0x%x, which is not a live block (double free?)", p)
	}
	delete(al.live, p)
	al.stats.LiveBlocks--
	al.stats.LiveBytes -= b.size
	if b.exact {
		al.stats.DriverFrees++
		return al.m.free(p)
	}
	al.free[b.size] = append(al.free[b.size], p)
	al.stats.CachedBlocks++
	al.stats.CachedBytes += b.size
	return nil
}

// trim returns every cached block to the driver.
func (al *allocator) trim() error {
	al.mu.Lock()
	defer al.mu.Unlock()
	return al.trimLocked()
}

func (al *allocator) trimLocked() error {
	var first error
	for c, l := range al.free {
		for _, p := range l {
			if err := al.m.free(p); err != nil && first == nil {
				first = err
			}
			al.stats.DriverFrees++
			al.stats.CachedBlocks--
			al.stats.CachedBytes -= c
		}
		delete(al.free, c)
	}
	return first
}

// snapshot returns the counters.
func (al *allocator) snapshot() AllocStats {
	al.mu.Lock()
	defer al.mu.Unlock()
	return al.stats
}
