package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// linker turns PTX into a cubin for the current device: the driver's JIT linker on a GPU, a
// fake in tests.
type linker interface {
	link(ptx string) ([]byte, error)
}

// CacheStats counts what the on-disk cubin cache did in this process.
type CacheStats struct {
	Hits        int // cubins read back and verified
	Builds      int // cubins produced by the linker
	Corrupt     int // entries whose checksum or header did not verify (rebuilt)
	WriteErrors int // entries that could not be written (the build still succeeded)
}

// cubinCache keeps linked cubins on disk so a process does not JIT the same PTX again: ptxas
// takes tens to hundreds of milliseconds per kernel. An entry's key covers everything that
// changes the machine code: the PTX text, the target arch and the driver version (the JIT
// ships with the driver). Entries are written atomically (temporary file, then rename), so a
// concurrent reader sees either nothing or a whole file, and carry a SHA-256 of their payload,
// so a truncated or flipped entry is detected and rebuilt instead of loaded.
type cubinCache struct {
	dir string // "" disables the disk cache

	mu    sync.Mutex
	stats CacheStats
}

// cubinMagic starts every entry; bumping it orphans old entries.
const cubinMagic = "TSQCUBIN1\n"

// defaultCacheDir is $TESSERA_CUBIN_CACHE ("off" disables the cache), else
// $XDG_CACHE_HOME/tessera-qa/cubin, else the user cache dir, else the temp dir.
func defaultCacheDir() string {
	if d := os.Getenv("TESSERA_CUBIN_CACHE"); d != "" {
		if d == "off" {
			return ""
		}
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "tessera-qa", "cubin")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "tessera-qa", "cubin")
	}
	return filepath.Join(os.TempDir(), "tessera-qa-cubin")
}

var processCubinCache = sync.OnceValue(func() *cubinCache { return &cubinCache{dir: defaultCacheDir()} })

// cubinKey names the entry for ptx compiled for arch by the JIT of driver version driver.
func cubinKey(ptx, arch string, driver int) string {
	h := sha256.New()
	h.Write([]byte(cubinMagic))
	h.Write([]byte(arch + "\x00" + strconv.Itoa(driver) + "\x00"))
	h.Write([]byte(ptx))
	return hex.EncodeToString(h.Sum(nil))
}

func (c *cubinCache) path(key string) string { return filepath.Join(c.dir, key+".cubin") }

// get returns the cubin for ptx, from disk when a verified entry exists, else from l (and
// then stores it). hit says which.
func (c *cubinCache) get(ptx, arch string, driver int, l linker) (cubin []byte, hit bool, err error) {
	key := cubinKey(ptx, arch, driver)
	if c.dir != "" {
		if data, err := os.ReadFile(c.path(key)); err == nil {
			if payload, ok := decodeEntry(data); ok {
				c.count(func(s *CacheStats) { s.Hits++ })
				return payload, true, nil
			}
			c.count(func(s *CacheStats) { s.Corrupt++ })
		}
	}
	cubin, err = l.link(ptx)
	if err != nil {
		return nil, false, err
	}
	c.count(func(s *CacheStats) { s.Builds++ })
	if c.dir != "" {
		if err := writeAtomic(c.dir, c.path(key), encodeEntry(cubin)); err != nil {
			// A read-only or full disk costs a rebuild next time, nothing else.
			c.count(func(s *CacheStats) { s.WriteErrors++ })
		}
	}
	return cubin, false, nil
}

// invalidate drops the entry for ptx: the driver refused to load it although it verified.
func (c *cubinCache) invalidate(ptx, arch string, driver int) {
	if c.dir != "" {
		_ = os.Remove(c.path(cubinKey(ptx, arch, driver)))
	}
}

func (c *cubinCache) count(f func(*CacheStats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

func (c *cubinCache) snapshot() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// encodeEntry is magic, SHA-256 of the payload, payload.
func encodeEntry(payload []byte) []byte {
	sum := sha256.Sum256(payload)
	out := make([]byte, 0, len(cubinMagic)+len(sum)+len(payload))
	out = append(out, cubinMagic...)
	out = append(out, sum[:]...)
	return append(out, payload...)
}

func decodeEntry(data []byte) ([]byte, bool) {
	head := len(cubinMagic) + sha256.Size
	if len(data) <= head || !bytes.HasPrefix(data, []byte(cubinMagic)) {
		return nil, false
	}
	payload := data[head:]
	sum := sha256.Sum256(payload)
	if !bytes.Equal(sum[:], data[len(cubinMagic):head]) {
		return nil, false
	}
	return payload, true
}

// writeAtomic writes data to path through a temporary file in the same directory and a
// rename, so no reader ever sees a partial file.
func writeAtomic(dir, path string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
