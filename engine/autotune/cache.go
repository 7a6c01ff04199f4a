package autotune

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/atomicfile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// cacheFormat names the document layout; it is also in the file name, so a binary with
// another layout uses other files instead of clobbering these.
const cacheFormat = "tessera-qa/autotune-cache/1"

// Entry is one remembered choice: the config chosen for kernel key Key by engine version
// Engine on the device whose file holds it, and what was measured to choose it.
type Entry struct {
	Key       string  `json:"key"`    // compiler.Schedule.Key: op, dtypes, shapes
	Engine    string  `json:"engine"` // engine version (engine/version.Version)
	Kind      string  `json:"kind"`
	Config    Config  `json:"config"`
	DefaultMs float64 `json:"default_ms"`
	BestMs    float64 `json:"best_ms"`
	Measured  int     `json:"measured"` // candidates timed
	Clock     string  `json:"clock"`
	Device    string  `json:"device_name,omitempty"`
	Commit    string  `json:"commit,omitempty"`
	Created   string  `json:"created"` // RFC 3339, UTC
}

func entryKey(engine, key string) string { return engine + " " + key }

// Cache is a directory of JSON files, one per device key (arch, SM count), each mapping
// (engine version, kernel key) to an Entry. Writers take an exclusive flock on the file's
// lock file, read, modify and write a temporary file that is renamed over the old one, so a
// reader (which takes no lock) always sees a whole document, and concurrent writers never
// lose each other's entries. A file that does not parse or fails its checksum is moved aside
// to NAME.corrupt and rebuilt, with a one-line warning coded E_CACHE_CORRUPT. That is the
// guarantee after a corruption: the entries of the corrupt file are gone from the cache (kept
// in NAME.corrupt for a person to read; a cache can re-tune them), and every entry stored
// after the file was rebuilt is kept.
type Cache struct {
	Dir string
	// Warn receives one line per warning; nil means os.Stderr.
	Warn io.Writer
	// LockTimeout bounds the wait for another process's lock; 0 means 30 s.
	LockTimeout time.Duration
}

// DefaultDir is os.UserCacheDir()/tessera-qa/autotune.
func DefaultDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", errs.Wrap(errs.Input, err, "autotune cache: no user cache directory (set XDG_CACHE_HOME or pass a directory)")
	}
	return filepath.Join(d, "tessera-qa", "autotune"), nil
}

// OpenCache returns the cache in dir ("" means DefaultDir), creating the directory.
func OpenCache(dir string) (*Cache, error) {
	if dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, errs.Wrap(errs.Input, err, "autotune cache: create %s", dir)
	}
	return &Cache{Dir: dir}, nil
}

// cacheFile is the document in one file.
type cacheFile struct {
	Format   string           `json:"format"`
	Device   fileDevice       `json:"device"`
	Entries  map[string]Entry `json:"entries"`
	Checksum string           `json:"checksum"`
}

type fileDevice struct {
	Arch    string `json:"arch"`
	SMCount int    `json:"sm_count"`
}

// Path is the file holding device d's entries: a readable name plus a digest of the exact
// device key, so that arches differing only in characters a file name cannot hold
// ("cpu/amd64" and "cpu_amd64") still get different files.
func (c *Cache) Path(d Device) string {
	var b strings.Builder
	for _, r := range d.Arch {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	h := sha256.Sum256([]byte(d.Key()))
	return filepath.Join(c.Dir, fmt.Sprintf("%s-sm%d-%s.v1.json", b.String(), d.SMCount, hex.EncodeToString(h[:4])))
}

func (c *Cache) timeout() time.Duration {
	if c.LockTimeout > 0 {
		return c.LockTimeout
	}
	return 30 * time.Second
}

func (c *Cache) warnf(format string, args ...any) {
	w := c.Warn
	if w == nil {
		w = os.Stderr
	}
	fmt.Fprintf(w, "tessera-qa: warning: "+format+"\n", args...)
}

// corruptError says why a cache file's contents cannot be trusted.
type corruptError struct{ reason string }

func (e *corruptError) Error() string { return e.reason }

func checksum(f *cacheFile) string {
	doc := *f
	doc.Checksum = ""
	b, _ := json.Marshal(doc) // maps marshal in key order: the digest is canonical
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// read loads d's file: an empty document when there is none, a *corruptError when its
// contents cannot be trusted, another error when it cannot be read at all.
func (c *Cache) read(d Device) (*cacheFile, error) {
	empty := &cacheFile{Format: cacheFormat, Device: fileDevice{d.Arch, d.SMCount}, Entries: map[string]Entry{}}
	b, err := os.ReadFile(c.Path(d))
	if errors.Is(err, fs.ErrNotExist) {
		return empty, nil
	}
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "autotune cache: read %s", c.Path(d))
	}
	var f cacheFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, &corruptError{"not JSON: " + err.Error()}
	}
	switch {
	case f.Format != cacheFormat:
		return nil, &corruptError{fmt.Sprintf("format %q, want %q", f.Format, cacheFormat)}
	case f.Device != empty.Device:
		return nil, &corruptError{fmt.Sprintf("holds device %s/sm%d, want %s", f.Device.Arch, f.Device.SMCount, d.Key())}
	case f.Checksum != checksum(&f):
		return nil, &corruptError{"checksum mismatch"}
	}
	if f.Entries == nil {
		f.Entries = map[string]Entry{}
	}
	for k, e := range f.Entries {
		if k != entryKey(e.Engine, e.Key) {
			return nil, &corruptError{fmt.Sprintf("entry %q is filed under %q", entryKey(e.Engine, e.Key), k)}
		}
	}
	return &f, nil
}

// write replaces d's file atomically; the caller holds the lock.
func (c *Cache) write(d Device, f *cacheFile) error {
	f.Checksum = checksum(f)
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return errs.Wrap(errs.Internal, err, "autotune cache: encode")
	}
	path := c.Path(d)
	if err := atomicfile.Write(path, append(b, '\n')); err != nil {
		return errs.Wrap(errs.Input, err, "autotune cache: write %s", path)
	}
	return nil
}

// update runs fn on d's document under the lock and writes the result. A corrupt file is
// moved aside and fn gets an empty document.
func (c *Cache) update(d Device, fn func(*cacheFile)) error {
	if err := d.Validate(); err != nil {
		return err
	}
	// The planted lost-write bug (a failpoints build only): read-modify-write without the
	// lock, so two writers that overlap each write a document without the other's entry.
	if !failpoint.Enabled(failpoint.AutotuneCacheUnlocked) {
		unlock, err := lockFile(c.Path(d)+".lock", c.timeout())
		if err != nil {
			return err
		}
		defer unlock()
	}
	f, err := c.read(d)
	var ce *corruptError
	if errors.As(err, &ce) {
		path := c.Path(d)
		if rerr := os.Rename(path, path+".corrupt"); rerr != nil {
			return errs.Wrap(errs.Input, rerr, "autotune cache: move corrupt %s aside", path)
		}
		c.warnf("%s: autotune cache %s is corrupt (%s); moved to %s.corrupt and rebuilt", errs.CacheCorrupt, path, ce.reason, filepath.Base(path))
		f, err = c.read(d)
	}
	if err != nil {
		return err
	}
	fn(f)
	return c.write(d, f)
}

// Lookup returns the entry for (engine, key) on device d. A corrupt file is rebuilt (empty)
// with a warning and reads as a miss.
func (c *Cache) Lookup(d Device, engine, key string) (Entry, bool, error) {
	if err := d.Validate(); err != nil {
		return Entry{}, false, err
	}
	f, err := c.read(d)
	var ce *corruptError
	if errors.As(err, &ce) {
		return Entry{}, false, c.update(d, func(*cacheFile) {})
	}
	if err != nil {
		return Entry{}, false, err
	}
	e, ok := f.Entries[entryKey(engine, key)]
	return e, ok, nil
}

// Store records e for device d, replacing an entry with the same engine and key.
func (c *Cache) Store(d Device, e Entry) error {
	if e.Key == "" || e.Engine == "" {
		return errs.New(errs.Input, "autotune cache: entry without key or engine version (%q, %q)", e.Key, e.Engine)
	}
	return c.update(d, func(f *cacheFile) { f.Entries[entryKey(e.Engine, e.Key)] = e })
}

// Entries lists device d's entries by engine version and key. A corrupt file is rebuilt.
func (c *Cache) Entries(d Device) ([]Entry, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	f, err := c.read(d)
	var ce *corruptError
	if errors.As(err, &ce) {
		return nil, c.update(d, func(*cacheFile) {})
	}
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(f.Entries))
	for k := range f.Entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]Entry, len(keys))
	for i, k := range keys {
		out[i] = f.Entries[k]
	}
	return out, nil
}

// Verify reads d's file as it is, repairing nothing: its entries when it parses and its
// checksum holds (none when there is no file), E_CACHE_CORRUPT saying why when not.
func (c *Cache) Verify(d Device) ([]Entry, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	f, err := c.read(d)
	var ce *corruptError
	if errors.As(err, &ce) {
		return nil, errs.New(errs.CacheCorrupt, "autotune cache %s: %s", c.Path(d), ce.reason)
	}
	if err != nil {
		return nil, err
	}
	keys := slices.Sorted(maps.Keys(f.Entries))
	out := make([]Entry, len(keys))
	for i, k := range keys {
		out[i] = f.Entries[k]
	}
	return out, nil
}

// WithLock runs fn with d's file locked as a writer locks it, so that fn sees and leaves the
// file between two writers' updates: a tool that edits or replaces the file (the stress
// runner corrupting it on purpose) goes through here.
func (c *Cache) WithLock(d Device, fn func(path string) error) error {
	if err := d.Validate(); err != nil {
		return err
	}
	unlock, err := lockFile(c.Path(d)+".lock", c.timeout())
	if err != nil {
		return err
	}
	defer unlock()
	return fn(c.Path(d))
}
