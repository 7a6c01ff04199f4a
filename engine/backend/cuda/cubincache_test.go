package cuda

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// fakeLinker "compiles" PTX by prefixing it, and counts calls.
type fakeLinker struct {
	calls atomic.Int32
	fail  error
}

func (l *fakeLinker) link(ptx string) ([]byte, error) {
	l.calls.Add(1)
	if l.fail != nil {
		return nil, l.fail
	}
	return []byte("CUBIN:" + ptx), nil
}

func TestCubinKeyCoversPTXArchAndDriver(t *testing.T) {
	base := cubinKey("ptx A", "sm_90", 13000)
	for name, k := range map[string]string{
		"ptx":    cubinKey("ptx B", "sm_90", 13000),
		"arch":   cubinKey("ptx A", "sm_100", 13000),
		"driver": cubinKey("ptx A", "sm_90", 13010),
		// The separators keep fields from sliding into each other.
		"boundary": cubinKey("0\x00ptx A", "sm_90", 1300),
	} {
		if k == base {
			t.Errorf("changing the %s does not change the key", name)
		}
	}
	if cubinKey("ptx A", "sm_90", 13000) != base {
		t.Error("key is not a function of its inputs")
	}
	if len(base) != 64 {
		t.Errorf("key %q is not a hex SHA-256", base)
	}
}

func TestCubinCacheHitAfterBuild(t *testing.T) {
	c := &cubinCache{dir: filepath.Join(t.TempDir(), "not", "yet", "there")}
	l := &fakeLinker{}
	got, hit, err := c.get("ptx 1", "sm_90", 13000, l)
	if err != nil || hit || string(got) != "CUBIN:ptx 1" {
		t.Fatalf("first get: %q hit=%v err=%v", got, hit, err)
	}
	got, hit, err = c.get("ptx 1", "sm_90", 13000, l)
	if err != nil || !hit || string(got) != "CUBIN:ptx 1" {
		t.Fatalf("second get: %q hit=%v err=%v", got, hit, err)
	}
	if _, hit, _ = c.get("ptx 1", "sm_90", 13010, l); hit {
		t.Error("a newer driver's JIT reused an older driver's cubin")
	}
	if n := l.calls.Load(); n != 2 {
		t.Errorf("linker called %d times, want 2", n)
	}
	if s := c.snapshot(); s != (CacheStats{Hits: 1, Builds: 2}) {
		t.Errorf("stats %+v", s)
	}
	entries, _ := os.ReadDir(c.dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	if len(entries) != 2 {
		t.Errorf("%d files in the cache, want 2", len(entries))
	}
}

func TestCubinCacheDetectsAndRebuildsCorruptEntries(t *testing.T) {
	corruptions := map[string]func([]byte) []byte{
		"flipped payload byte": func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"flipped checksum":     func(b []byte) []byte { b[len(cubinMagic)] ^= 0x80; return b },
		"truncated":            func(b []byte) []byte { return b[:len(b)-3] },
		"header only":          func(b []byte) []byte { return b[:len(cubinMagic)+32] },
		"wrong magic":          func(b []byte) []byte { b[0] = 'X'; return b },
		"empty":                func([]byte) []byte { return nil },
	}
	for name, corrupt := range corruptions {
		t.Run(name, func(t *testing.T) {
			c := &cubinCache{dir: t.TempDir()}
			l := &fakeLinker{}
			if _, _, err := c.get("ptx", "sm_90", 13000, l); err != nil {
				t.Fatal(err)
			}
			path := c.path(cubinKey("ptx", "sm_90", 13000))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, corrupt(data), 0o644); err != nil {
				t.Fatal(err)
			}
			got, hit, err := c.get("ptx", "sm_90", 13000, l)
			if err != nil || hit || string(got) != "CUBIN:ptx" {
				t.Fatalf("after corruption: %q hit=%v err=%v; want a rebuild", got, hit, err)
			}
			if s := c.snapshot(); s.Corrupt != 1 || s.Builds != 2 {
				t.Errorf("stats %+v, want one corrupt entry and two builds", s)
			}
			// The rebuilt entry replaced the corrupt one.
			if _, hit, _ := c.get("ptx", "sm_90", 13000, l); !hit {
				t.Error("rebuilt entry was not written back")
			}
		})
	}
}

func TestCubinCacheDisabledOrUnwritable(t *testing.T) {
	l := &fakeLinker{}
	off := &cubinCache{}
	for range 2 {
		if _, hit, err := off.get("p", "sm_90", 1, l); err != nil || hit {
			t.Fatalf("disabled cache: hit=%v err=%v", hit, err)
		}
	}
	if l.calls.Load() != 2 {
		t.Errorf("disabled cache linked %d times, want 2", l.calls.Load())
	}
	// A file where the cache directory should be: writes fail, builds still succeed.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := &cubinCache{dir: filepath.Join(blocker, "cubin")}
	got, _, err := bad.get("p", "sm_90", 1, l)
	if err != nil || string(got) != "CUBIN:p" {
		t.Fatalf("unwritable cache: %q %v", got, err)
	}
	if s := bad.snapshot(); s.WriteErrors != 1 {
		t.Errorf("stats %+v, want one write error", s)
	}
}

func TestCubinCacheLinkErrorsPassThrough(t *testing.T) {
	c := &cubinCache{dir: t.TempDir()}
	l := &fakeLinker{fail: errs.New(errs.Unsupported, "ptxas: bad PTX")}
	if _, _, err := c.get("p", "sm_90", 1, l); errs.CodeOf(err) != errs.Unsupported {
		t.Fatalf("got %v, want the linker's E_UNSUPPORTED", err)
	}
	if entries, _ := os.ReadDir(c.dir); len(entries) != 0 {
		t.Errorf("a failed build left %d cache files", len(entries))
	}
}

func TestCubinCacheInvalidate(t *testing.T) {
	c := &cubinCache{dir: t.TempDir()}
	l := &fakeLinker{}
	_, _, _ = c.get("p", "sm_90", 1, l)
	c.invalidate("p", "sm_90", 1)
	if _, hit, _ := c.get("p", "sm_90", 1, l); hit {
		t.Error("invalidated entry was still served")
	}
}

// TestCubinCacheConcurrentWriters has goroutines build and read the same and different keys
// at once, as parallel test processes do: every reader gets exactly its own cubin.
func TestCubinCacheConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &cubinCache{dir: dir} // one cache value per "process"
			l := &fakeLinker{}
			for i := range 20 {
				ptx := []string{"shared kernel", "kernel of " + string(rune('a'+g))}[i%2]
				got, _, err := c.get(ptx, "sm_90", 1, l)
				if err != nil || !bytes.Equal(got, []byte("CUBIN:"+ptx)) {
					t.Errorf("goroutine %d: %q %v", g, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestEntryEncoding(t *testing.T) {
	payload := []byte("\x7fELF cubin bytes")
	got, ok := decodeEntry(encodeEntry(payload))
	if !ok || !bytes.Equal(got, payload) {
		t.Fatalf("round trip: %q %v", got, ok)
	}
}
