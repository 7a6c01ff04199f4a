package autotune

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func newCache(t *testing.T) (*Cache, *bytes.Buffer) {
	t.Helper()
	c, err := OpenCache(filepath.Join(t.TempDir(), "autotune"))
	if err != nil {
		t.Fatal(err)
	}
	var warn bytes.Buffer
	c.Warn = &warn
	return c, &warn
}

func entry(key string, c Config) Entry {
	return Entry{Key: key, Engine: "0.1.0", Kind: "matmul", Config: c, DefaultMs: 2, BestMs: 1, Measured: 3, Clock: "fake", Created: "2026-01-01T00:00:00Z"}
}

func TestCacheRoundTripAndDeviceSeparation(t *testing.T) {
	c, warn := newCache(t)
	if _, ok, err := c.Lookup(h100, "0.1.0", "k"); ok || err != nil {
		t.Fatalf("empty cache: hit %v, err %v", ok, err)
	}
	must(t, c.Store(h100, entry("k", cfg(128, 128, 64, 3))))
	must(t, c.Store(h100nvl, entry("k", cfg(64, 128, 32, 4))))
	must(t, c.Store(hostCPU, entry("k", cfg(32, 32, 32, 2))))
	must(t, c.Store(h100, entry("k2", cfg(64, 64, 32, 2))))
	for _, tc := range []struct {
		d    Device
		want Config
	}{{h100, cfg(128, 128, 64, 3)}, {h100nvl, cfg(64, 128, 32, 4)}, {hostCPU, cfg(32, 32, 32, 2)}} {
		e, ok, err := c.Lookup(tc.d, "0.1.0", "k")
		if err != nil || !ok || e.Config != tc.want {
			t.Errorf("%s: lookup = %v %v %v, want %v", tc.d.Key(), e.Config, ok, err, tc.want)
		}
	}
	if _, ok, _ := c.Lookup(h100, "0.2.0", "k"); ok {
		t.Error("another engine version hit an entry")
	}
	if c.Path(h100) == c.Path(h100nvl) || c.Path(hostCPU) == c.Path(Device{Arch: "cpu_test", SMCount: 2}) {
		t.Error("distinct devices share a file")
	}
	es, err := c.Entries(h100)
	if err != nil || len(es) != 2 || es[0].Key != "k" || es[1].Key != "k2" {
		t.Errorf("entries of h100 = %+v, %v", es, err)
	}
	// Replacing an entry keeps the others.
	must(t, c.Store(h100, entry("k", cfg(256, 128, 32, 3))))
	if es, _ := c.Entries(h100); len(es) != 2 || es[0].Config != cfg(256, 128, 32, 3) {
		t.Errorf("after replace: %+v", es)
	}
	if warn.Len() != 0 {
		t.Errorf("warnings on a healthy cache: %s", warn)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCacheCorruptFilesAreRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mangle func(b []byte) []byte
		reason string
	}{
		{"garbage", func([]byte) []byte { return []byte("\x00\x01not json") }, "not JSON"},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, "not JSON"},
		{"empty", func([]byte) []byte { return nil }, "not JSON"},
		{"edited value", func(b []byte) []byte { return bytes.Replace(b, []byte(`"bm": 128`), []byte(`"bm": 16`), 1) }, "checksum"},
		{"other device", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"sm_count": 132`), []byte(`"sm_count": 114`), 1)
		}, "holds device"},
		{"other format", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`autotune-cache/1`), []byte(`autotune-cache/9`), 1)
		}, "format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, warn := newCache(t)
			must(t, c.Store(h100, entry("k", cfg(128, 128, 64, 3))))
			path := c.Path(h100)
			b, err := os.ReadFile(path)
			must(t, err)
			bad := tc.mangle(b)
			if bytes.Equal(bad, b) {
				t.Fatal("mangle changed nothing")
			}
			must(t, os.WriteFile(path, bad, 0o644))
			if _, ok, err := c.Lookup(h100, "0.1.0", "k"); ok || err != nil {
				t.Fatalf("lookup in a corrupt file: hit %v, err %v", ok, err)
			}
			if !strings.Contains(warn.String(), "corrupt ("+tc.reason) || strings.Count(warn.String(), "\n") != 1 {
				t.Errorf("warning %q, want one line naming %q", warn, tc.reason)
			}
			if got, _ := os.ReadFile(path + ".corrupt"); !bytes.Equal(got, bad) {
				t.Error("corrupt file not kept aside")
			}
			// Rebuilt: a valid, empty document that takes new entries.
			must(t, c.Store(h100, entry("k3", cfg(64, 64, 32, 2))))
			es, err := c.Entries(h100)
			if err != nil || len(es) != 1 || es[0].Key != "k3" {
				t.Errorf("after rebuild: %+v, %v", es, err)
			}
			if strings.Count(warn.String(), "\n") != 1 {
				t.Errorf("rebuilt file warned again: %s", warn)
			}
		})
	}
}

func TestCacheStoreRebuildsCorruptFile(t *testing.T) {
	c, warn := newCache(t)
	must(t, os.WriteFile(c.Path(h100), []byte("{"), 0o644))
	must(t, c.Store(h100, entry("k", cfg(128, 128, 64, 3))))
	if e, ok, err := c.Lookup(h100, "0.1.0", "k"); !ok || err != nil || e.Config != cfg(128, 128, 64, 3) {
		t.Errorf("lookup after store into corrupt file: %v %v %v", e, ok, err)
	}
	if !strings.Contains(warn.String(), "rebuilt") {
		t.Errorf("no warning: %q", warn)
	}
}

func TestCacheLockTimeout(t *testing.T) {
	c, _ := newCache(t)
	unlock, err := lockFile(c.Path(h100)+".lock", time.Second)
	must(t, err)
	c.LockTimeout = 50 * time.Millisecond
	err = c.Store(h100, entry("k", cfg(64, 64, 32, 2)))
	if errs.CodeOf(err) != errs.Timeout {
		t.Errorf("store while locked: %v, want E_TIMEOUT", err)
	}
	// Another device's file has its own lock.
	must(t, c.Store(h100nvl, entry("k", cfg(64, 64, 32, 2))))
	unlock()
	must(t, c.Store(h100, entry("k", cfg(64, 64, 32, 2))))
}

func TestCacheRejectsBadInput(t *testing.T) {
	c, _ := newCache(t)
	if err := c.Store(h100, Entry{Key: "k"}); err == nil {
		t.Error("entry without engine version stored")
	}
	if err := c.Store(Device{Arch: "sm_90"}, entry("k", cfg(1, 1, 1, 1))); err == nil {
		t.Error("device without SM count stored")
	}
	if _, _, err := c.Lookup(Device{}, "0.1.0", "k"); err == nil {
		t.Error("lookup on an empty device")
	}
}

// Child processes of TestCacheConcurrentProcesses run this test with the environment below;
// in a normal run it does nothing.
const childEnv = "TESSERA_AUTOTUNE_CACHE_CHILD"

const childStores = 25

func TestCacheChildProcess(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("helper process for TestCacheConcurrentProcesses")
	}
	var dir string
	var id, sms int
	if _, err := fmt.Sscanf(spec, "%d %d %s", &id, &sms, &dir); err != nil {
		t.Fatalf("bad %s=%q: %v", childEnv, spec, err)
	}
	c := &Cache{Dir: dir, LockTimeout: 20 * time.Second}
	d := h100
	d.SMCount = sms
	for j := range childStores {
		key := fmt.Sprintf("child%d/op%d", id, j)
		must(t, c.Store(d, entry(key, cfg(16<<(j%4), 64, 32, 1+id%4))))
		must(t, c.Store(d, entry("shared", cfg(16, 16, 16, id+1))))
		// Read-your-writes, with every other process writing at the same time.
		e, ok, err := c.Lookup(d, "0.1.0", key)
		if err != nil || !ok || e.Key != key {
			t.Fatalf("child %d: own entry %s not found after store: %v %v", id, key, ok, err)
		}
	}
}

func TestCacheConcurrentProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("inside a child")
	}
	dir := t.TempDir()
	// Four processes hammer one device's file; two more share another device's file.
	smOf := []int{132, 132, 132, 132, 114, 114}
	cmds := make([]*exec.Cmd, len(smOf))
	outs := make([]*bytes.Buffer, len(smOf))
	for id, sms := range smOf {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCacheChildProcess$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %s", childEnv, id, sms, dir))
		outs[id] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[id], outs[id]
		must(t, cmd.Start())
		cmds[id] = cmd
	}
	for id, cmd := range cmds {
		if err := cmd.Wait(); err != nil || !strings.Contains(outs[id].String(), "--- PASS: TestCacheChildProcess") {
			t.Errorf("child %d: %v\n%s", id, err, outs[id])
		}
	}
	c := &Cache{Dir: dir}
	var warn bytes.Buffer
	c.Warn = &warn
	for _, sms := range []int{132, 114} {
		d := h100
		d.SMCount = sms
		b, err := os.ReadFile(c.Path(d))
		must(t, err)
		var doc cacheFile
		must(t, json.Unmarshal(b, &doc))
		es, err := c.Entries(d)
		must(t, err)
		byKey := map[string]Entry{}
		for _, e := range es {
			byKey[e.Key] = e
		}
		var ids []int
		for id, s := range smOf {
			if s == sms {
				ids = append(ids, id)
			}
		}
		if len(es) != len(ids)*childStores+1 {
			t.Errorf("sm%d: %d entries, want %d", sms, len(es), len(ids)*childStores+1)
		}
		for _, id := range ids {
			for j := range childStores {
				if _, ok := byKey[fmt.Sprintf("child%d/op%d", id, j)]; !ok {
					t.Errorf("sm%d: entry child%d/op%d lost", sms, id, j)
				}
			}
		}
		if st := byKey["shared"].Config.Stages; !slices.ContainsFunc(ids, func(id int) bool { return id+1 == st }) {
			t.Errorf("sm%d: shared entry %+v was written by none of children %v", sms, byKey["shared"], ids)
		}
	}
	if warn.Len() > 0 {
		t.Errorf("warnings: %s", warn.String())
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*tmp-*"))
	corrupt, _ := filepath.Glob(filepath.Join(dir, "*.corrupt"))
	if len(leftovers)+len(corrupt) > 0 {
		t.Errorf("left behind: %v %v", leftovers, corrupt)
	}
}

// Verify reports a corrupt file with E_CACHE_CORRUPT and repairs nothing; the warning of the
// repairing paths carries the same code. WithLock holds the writers' lock.
func TestCacheVerifyAndWithLock(t *testing.T) {
	c, warn := newCache(t)
	if es, err := c.Verify(h100); err != nil || len(es) != 0 {
		t.Fatalf("no file: %v %v", es, err)
	}
	must(t, c.Store(h100, entry("k", cfg(128, 128, 64, 3))))
	if es, err := c.Verify(h100); err != nil || len(es) != 1 || es[0] != entry("k", cfg(128, 128, 64, 3)) {
		t.Fatalf("healthy file: %+v %v", es, err)
	}
	c.LockTimeout = 50 * time.Millisecond
	err := c.WithLock(h100, func(path string) error {
		if path != c.Path(h100) {
			t.Errorf("WithLock gave %s, want %s", path, c.Path(h100))
		}
		if err := c.Store(h100, entry("k2", cfg(64, 64, 32, 2))); errs.CodeOf(err) != errs.Timeout {
			t.Errorf("store while WithLock holds the lock: %v, want E_TIMEOUT", err)
		}
		b, _ := os.ReadFile(path)
		return os.WriteFile(path, b[:len(b)/2], 0o644)
	})
	must(t, err)
	_, err = c.Verify(h100)
	if errs.CodeOf(err) != errs.CacheCorrupt || !strings.Contains(err.Error(), c.Path(h100)) {
		t.Fatalf("truncated file: %v, want E_CACHE_CORRUPT naming the file", err)
	}
	if _, err := os.Stat(c.Path(h100) + ".corrupt"); err == nil {
		t.Fatal("Verify moved the file aside")
	}
	if _, ok, err := c.Lookup(h100, "0.1.0", "k"); ok || err != nil {
		t.Fatalf("lookup in the truncated file: %v %v", ok, err)
	}
	if !strings.HasPrefix(warn.String(), "tessera-qa: warning: E_CACHE_CORRUPT: autotune cache ") {
		t.Fatalf("warning %q, want the E_CACHE_CORRUPT code first", warn)
	}
}
