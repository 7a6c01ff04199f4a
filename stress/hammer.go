package stress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/autotune"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
)

// PressureCache runs Jobs hammer processes beside the graph jobs, all storing and looking up
// entries in ONE autotune cache folder (engine/autotune.Cache, one file for HammerDevice, so
// every store contends for its lock) until the soak ends. Each hammer overwrites its own keys
// round robin (h<N>/k<i>: one writer, so the last store is the value) and, every fourth step,
// one of a few shared keys (every hammer writes them), and looks up the key it just stored, a
// random own key and a random shared key. Every store writes a value with a unique id, and
// every operation is recorded with its start and end on the machine's wall clock, so the
// runner can judge the history afterwards (JudgeCache): a store that must be visible and is
// not is lost; a value nobody stored, or not exactly what its store wrote, is wrong.
//
// Halfway through, the runner corrupts the file in place under the cache's own lock
// (truncation or one changed digit, by the seed): as corruption at rest or a writer that
// ignores the lock would. The cache must detect it (one E_CACHE_CORRUPT warning from the
// first process to touch it, the bytes kept as NAME.corrupt) and the hammers go on. The
// cache's guarantee across a corruption: entries stored before it are gone with the corrupt
// file (a cache re-tunes them); every store that began after the corruption was written is
// kept. JudgeCache checks exactly that.
//
// The job processes first run every pool of the plan, each from its own pool on (warmAll),
// judged against the alone digests. With --device cuda they share one fresh CUDA_CACHE_PATH,
// so the driver's JIT cache is written by several processes compiling the same kernels at once
// and read back by processes that reach a kernel another compiled first; every result must
// still give its alone bits (the CPU backend JIT-compiles nothing, and the report says so).

// HammerDevice is the device whose cache file the hammers share.
var HammerDevice = autotune.Device{Arch: "stress/hammer", SMCount: 1, Name: "stress cache hammer"}

const (
	hammerEngine     = "stress-hammer"
	hammerOwnKeys    = 64
	hammerSharedKeys = 8
)

// CacheOp is one operation on the hammered cache. Start and End are unix nanoseconds: every
// process on one machine reads the same wall clock.
type CacheOp struct {
	// Op is "store", "lookup", "notice" (a warning of the cache: a corrupt file moved aside) or
	// "inject" (the runner's corruption; Hammer -1).
	Op     string `json:"op"`
	Hammer int    `json:"hammer"`
	Key    string `json:"key,omitempty"`
	// ID is the value's id: stored, or found by a lookup (-1: a miss). Exact says the entry
	// found is field for field what the store of ID wrote.
	ID     int64  `json:"id"`
	Exact  bool   `json:"exact,omitempty"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// CacheReport is the cache pressure part of a Report.
type CacheReport struct {
	Hammers   int      `json:"hammers"`
	Dir       string   `json:"dir"`
	Stores    int      `json:"stores"`
	Lookups   int      `json:"lookups"`
	Entries   int      `json:"entries"` // in the final file
	Lost      int      `json:"lost"`
	Wrong     int      `json:"wrong"`
	OpErrors  int      `json:"op_errors"`
	Injected  []string `json:"injected,omitempty"`
	Detected  int      `json:"detected"` // E_CACHE_CORRUPT warnings
	KeptAside bool     `json:"kept_aside"`
	FinalOK   bool     `json:"final_verifies"`
	Guarantee string   `json:"guarantee"`
	JIT       string   `json:"jit"`
	JITFiles  int      `json:"jit_files"`
}

const cacheGuarantee = "entries stored before a corruption go with the corrupt file (kept as .corrupt); every store begun after it is kept"

// entryFor is the entry a store of value id writes under key: every field follows from the id,
// so a lookup can tell a whole entry from a mixed or torn one.
func entryFor(key string, id int64) autotune.Entry {
	return autotune.Entry{Key: key, Engine: hammerEngine, Kind: "matmul",
		Config:    autotune.Config{BM: 16 << (id % 4), BN: 16 << (id / 4 % 4), BK: 16 << (id / 16 % 3), Stages: 1 + int(id%5)},
		DefaultMs: float64(id%1000) / 8, BestMs: float64(id%777) / 16, Measured: int(id), Clock: "hammer",
		Commit: strconv.FormatInt(id, 16), Created: "2026-01-01T00:00:00Z"}
}

// HammerOptions is one hammer's loop.
type HammerOptions struct {
	Dir      string
	Hammer   int
	Until    time.Time
	Sampler  *Sampler
	Interval time.Duration
	Emit     func(Event)
}

// RunHammer stores and looks up entries in the cache in o.Dir until o.Until or ctx ends,
// emitting every operation (KindCache) and, with a Sampler, monitor samples.
func RunHammer(ctx context.Context, o HammerOptions) error {
	c, err := autotune.OpenCache(o.Dir)
	if err != nil {
		return err
	}
	emit := func(op CacheOp) { op.Hammer = o.Hammer; o.Emit(Event{Kind: KindCache, Job: o.Hammer, Cache: &op}) }
	c.Warn = noticeWriter(emit)
	rng := rand.New(rand.NewPCG(uint64(o.Hammer), 0x4a11))
	seq := int64(0)
	store := func(key string) {
		id := int64(o.Hammer)<<40 | seq
		seq++
		start := time.Now().UnixNano()
		err := c.Store(HammerDevice, entryFor(key, id))
		emit(CacheOp{Op: "store", Key: key, ID: id, Start: start, End: time.Now().UnixNano(), Code: codeOf(err), Reason: errText(err)})
	}
	lookup := func(key string) {
		start := time.Now().UnixNano()
		e, ok, err := c.Lookup(HammerDevice, hammerEngine, key)
		op := CacheOp{Op: "lookup", Key: key, ID: -1, Start: start, End: time.Now().UnixNano(), Code: codeOf(err), Reason: errText(err)}
		if ok {
			op.ID = int64(e.Measured)
			op.Exact = e == entryFor(key, op.ID)
		}
		emit(op)
	}
	t0 := time.Now()
	sample := func(phase string) {
		if o.Sampler != nil {
			s := o.Sampler.Read(since(t0), phase)
			o.Emit(Event{Kind: "sample", Job: o.Hammer, Sample: &s})
		}
	}
	sample("before")
	next := time.Now().Add(o.Interval)
	for i := 0; time.Now().Before(o.Until) && ctx.Err() == nil; i++ {
		own := ownKey(o.Hammer, i%hammerOwnKeys)
		store(own)
		lookup(own)
		if i%4 == 0 {
			store(sharedKey(rng.IntN(hammerSharedKeys)))
		}
		lookup(ownKey(o.Hammer, rng.IntN(hammerOwnKeys)))
		lookup(sharedKey(rng.IntN(hammerSharedKeys)))
		if time.Now().After(next) {
			sample("during")
			next = time.Now().Add(o.Interval)
		}
	}
	sample("after")
	return nil
}

func ownKey(h, k int) string { return fmt.Sprintf("h%d/k%d", h, k) }
func sharedKey(k int) string { return fmt.Sprintf("shared/k%d", k) }

// ownerOf is the hammer that owns key, or -1 for a shared key.
func ownerOf(key string) int {
	h, _, ok := strings.Cut(strings.TrimPrefix(key, "h"), "/")
	if n, err := strconv.Atoi(h); ok && err == nil && strings.HasPrefix(key, "h") {
		return n
	}
	return -1
}

func codeOf(err error) string {
	if err == nil {
		return ""
	}
	return string(errs.CodeOf(err))
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// noticeWriter turns the cache's warning lines into "notice" operations.
type noticeWriter func(CacheOp)

func (w noticeWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		now := time.Now().UnixNano()
		code := ""
		if strings.Contains(line, string(errs.CacheCorrupt)+":") {
			code = string(errs.CacheCorrupt)
		}
		w(CacheOp{Op: "notice", ID: -1, Start: now, End: now, Code: code, Reason: line})
	}
	return len(p), nil
}

// cacheRun is the runner's side of PressureCache.
type cacheRun struct {
	dir, jitDir string
	hammers     int
	injected    []byte // the file as the runner left it
}

// startHammers starts the hammer processes and the corruption, and points the graph jobs at a
// fresh JIT cache on CUDA.
func startHammers(ctx context.Context, o Options, c *collector, until time.Time, tmp string) (Options, func()) {
	cr := &cacheRun{dir: filepath.Join(o.OutDir, "autotune-cache"), hammers: o.Jobs}
	c.mu.Lock()
	c.press.cache = cr
	c.mu.Unlock()
	failf := func(format string, args ...any) {
		c.mu.Lock()
		c.fail(fmt.Sprintf(format, args...), "")
		c.mu.Unlock()
	}
	os.RemoveAll(cr.dir) // a fresh cache: a rerun into the same --out must not inherit entries
	if o.Backend.Name() == "cuda" {
		cr.jitDir = filepath.Join(o.OutDir, "jit-cache")
		os.RemoveAll(cr.jitDir)
		if err := os.MkdirAll(cr.jitDir, 0o755); err != nil {
			failf("jit cache folder: %v", err)
		}
		inner := o.Command
		o.Command = func(ctx context.Context, a string) *exec.Cmd {
			cmd := inner(ctx, a)
			if cmd.Env == nil {
				cmd.Env = os.Environ()
			}
			cmd.Env = append(cmd.Env, "CUDA_CACHE_PATH="+cr.jitDir, "CUDA_CACHE_DISABLE=0")
			return cmd
		}
	}
	ctx, cancel := context.WithDeadline(ctx, until.Add(workerGrace))
	var wg sync.WaitGroup
	for h := range o.Jobs {
		startWorker(ctx, o, WorkerArgs{Job: h, Role: RoleHammer, CacheDir: cr.dir, Until: until, TempDir: tmp, Interval: o.Interval},
			fmt.Sprintf("hammer %d", h), c, &wg)
	}
	if !o.NoCorrupt {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(until.Add(-o.Duration / 2))):
			}
			op, err := corrupt(ctx, cr, o.Seed, until)
			if err != nil {
				failf("cache corruption not injected: %v", err)
				return
			}
			c.add("runner", Event{Kind: KindCache, Job: -1, Cache: op})
		}()
	}
	return o, func() { wg.Wait(); cancel() }
}

// corrupt changes the hammered file in place under the cache's lock, waiting for the file to
// exist; the seed picks truncation to half or one changed digit (the JSON still parses, so
// only the checksum can tell).
func corrupt(ctx context.Context, cr *cacheRun, seed uint64, until time.Time) (*CacheOp, error) {
	cache := &autotune.Cache{Dir: cr.dir, Warn: io.Discard}
	for ctx.Err() == nil && time.Now().Before(until) {
		var op *CacheOp
		err := cache.WithLock(HammerDevice, func(path string) error {
			start := time.Now().UnixNano()
			b, err := os.ReadFile(path)
			if err != nil || len(b) < 64 {
				return nil // not written yet: try again
			}
			bad := bytes.Clone(b)
			what := fmt.Sprintf("truncated %s from %d to %d bytes", filepath.Base(path), len(b), len(b)/2)
			if seed%2 == 1 {
				what = ""
				for i := len(b) / 2; i < len(b); i++ {
					if bad[i] >= '0' && bad[i] <= '9' {
						bad[i] = '0' + (bad[i]-'0'+1)%10
						what = fmt.Sprintf("changed the digit at byte %d of %s from %c to %c", i, filepath.Base(path), b[i], bad[i])
						break
					}
				}
				if what == "" {
					return nil
				}
			} else {
				bad = bad[:len(b)/2]
			}
			if err := os.WriteFile(path, bad, 0o644); err != nil { // in place: no rename
				return err
			}
			cr.injected = bad
			op = &CacheOp{Op: "inject", Hammer: -1, ID: -1, Start: start, End: time.Now().UnixNano(), Reason: what}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if op != nil {
			return op, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, errs.New(errs.Timeout, "the hammered cache file %s never held an entry before the soak ended", cache.Path(HammerDevice))
}

// judgeCacheRun judges PressureCache after every process ended; the caller holds c.mu.
func judgeCacheRun(c *collector) *CacheReport {
	cr := c.press.cache
	cache := &autotune.Cache{Dir: cr.dir, Warn: io.Discard}
	entries, verr := cache.Verify(HammerDevice)
	final := map[string]autotune.Entry{}
	for _, e := range entries {
		final[e.Key] = e
	}
	r, bad := JudgeCache(c.press.ops, final)
	r.Hammers, r.Dir, r.FinalOK, r.Guarantee = cr.hammers, cr.dir, verr == nil, cacheGuarantee
	if verr != nil {
		bad = append(bad, "the final cache file does not verify: "+verr.Error())
	}
	if cr.injected != nil {
		got, err := os.ReadFile(cache.Path(HammerDevice) + ".corrupt")
		r.KeptAside = err == nil && bytes.Equal(got, cr.injected)
		if !r.KeptAside {
			bad = append(bad, "the corrupt file was not kept aside as "+filepath.Base(cache.Path(HammerDevice))+".corrupt with the injected bytes")
		}
	}
	if cr.jitDir != "" {
		r.JITFiles = countFiles(cr.jitDir)
		r.JIT = fmt.Sprintf("CUDA_CACHE_PATH=%s shared by the %d job processes, each of which first ran every job's graphs: %d files; every result checked against its alone digest", cr.jitDir, cr.hammers, r.JITFiles)
	} else {
		r.JIT = "skipped: the cpu backend JIT-compiles nothing (the driver's JIT cache is exercised with --device cuda)"
	}
	for _, b := range bad {
		c.fail("cache: "+b, "")
	}
	return &r
}

// JudgeCache judges a hammered cache's history and its final entries (see PressureCache) and
// returns the counts and a line per problem.
func JudgeCache(ops []CacheOp, final map[string]autotune.Entry) (CacheReport, []string) {
	var r CacheReport
	var bad []string
	badf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	stores := map[string][]CacheOp{}
	byID := map[string]map[int64]CacheOp{}
	var lookups []CacheOp
	injStart, injEnd, injections := int64(1<<63-1), int64(0), 0
	for _, op := range ops {
		switch op.Op {
		case "store", "lookup":
			if op.Op == "store" {
				r.Stores++
			} else {
				r.Lookups++
			}
			if op.Code != "" {
				r.OpErrors++
				badf("hammer %d: %s %s: %s", op.Hammer, op.Op, op.Key, op.Reason)
				continue
			}
			if op.Op == "lookup" {
				lookups = append(lookups, op)
				continue
			}
			stores[op.Key] = append(stores[op.Key], op)
			if byID[op.Key] == nil {
				byID[op.Key] = map[int64]CacheOp{}
			}
			byID[op.Key][op.ID] = op
		case "notice":
			if op.Code == string(errs.CacheCorrupt) {
				r.Detected++
			} else {
				badf("hammer %d: a cache warning without the %s code: %s", op.Hammer, errs.CacheCorrupt, op.Reason)
			}
		case "inject":
			injections++
			r.Injected = append(r.Injected, op.Reason)
			injStart, injEnd = min(injStart, op.Start), max(injEnd, op.End)
		}
	}
	switch {
	case r.Detected < injections:
		badf("corruption not detected: %d injected, %d %s warnings", injections, r.Detected, errs.CacheCorrupt)
	case r.Detected > injections:
		badf("the cache was found corrupt %d times and corrupted on purpose %d: the hammers corrupted it", r.Detected, injections)
	}
	// kept: a store the guarantee covers (no corruption, or begun after it was written).
	kept := func(s CacheOp) bool { return injections == 0 || s.Start > injEnd }
	for _, l := range lookups {
		if l.ID >= 0 {
			s, ok := byID[l.Key][l.ID]
			if !ok || !l.Exact || s.Start > l.End {
				r.Wrong++
				badf("hammer %d: lookup of %s found value %x, which no store of that key wrote before it (or not exactly)", l.Hammer, l.Key, l.ID)
				continue
			}
		}
		// The stores that ended before the lookup began, and must be visible to it: kept
		// ones, and any when the lookup ended before the corruption began.
		var last *CacheOp
		for i, s := range stores[l.Key] {
			if s.End < l.Start && (kept(s) || l.End < injStart) && (last == nil || s.Start > last.Start) {
				last = &stores[l.Key][i]
			}
		}
		switch {
		case last == nil:
		case l.ID < 0:
			r.Lost++
			badf("hammer %d: lookup of %s missed; value %x was stored before it", l.Hammer, l.Key, last.ID)
		case ownerOf(l.Key) == l.Hammer && l.ID != last.ID:
			// One writer: its last store is the value.
			r.Lost++
			badf("hammer %d: lookup of its own %s found value %x, but its last store was %x (a lost write)", l.Hammer, l.Key, l.ID, last.ID)
		}
	}
	for key, ss := range stores {
		f, ok := final[key]
		anyKept := false
		for _, s := range ss {
			anyKept = anyKept || kept(s)
		}
		if !ok {
			if anyKept {
				r.Lost++
				badf("%s is missing from the final file (%d stores)", key, len(ss))
			}
			continue
		}
		id := int64(f.Measured)
		s, known := byID[key][id]
		if !known || f != entryFor(key, id) {
			r.Wrong++
			badf("%s holds value %x at the end, which no store wrote (or not exactly)", key, id)
			continue
		}
		// The final value must be one not surely overwritten: no other store began after it ended.
		for _, s2 := range ss {
			if anyKept && s2.Start > s.End {
				r.Lost++
				badf("%s holds value %x at the end, but value %x was stored after it (a lost write)", key, id, s2.ID)
				break
			}
		}
	}
	for key := range final {
		if _, ok := stores[key]; !ok {
			r.Wrong++
			badf("%s is in the final file, but no hammer stored it", key)
		}
	}
	r.Entries = len(final)
	return r, bad
}

// warmAll runs every graph of every pool of the plan once, starting with the job's own pool
// and going round, so that the job processes compile the same kernels at the same time and
// each then loads kernels another process compiled first: with --device cuda, the driver's
// JIT cache (one CUDA_CACHE_PATH) is written by several processes at once and read back by
// others. Each result is judged against its alone digest; only results that do not pass are
// emitted (as the job's events, Graph counting from -1 down: not in its pool).
func warmAll(opt JobOptions, rn harness.Runner) error {
	n := len(opt.Plan.Jobs)
	slot := -1
	for k := range n {
		j := (opt.Job + k) % n
		for i, g := range opt.Plan.Jobs[j] {
			c, _, err := BuildCase(g.Seed, caseName(j, i), g.Digest)
			if err != nil {
				return err
			}
			r := rn.Run(c)
			if r.Verdict != harness.VerdictPass {
				opt.Emit(Event{Kind: "graph", Job: opt.Job, Graph: slot, MS: r.Timing.TotalMS, Verdict: r.Verdict,
					Code: r.ErrorCode, Reason: "warm-up of " + caseName(j, i) + ": " + r.Reason, Replay: r.Replay})
			}
			slot--
		}
	}
	return nil
}
