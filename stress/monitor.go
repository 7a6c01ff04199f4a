package stress

import (
	"bufio"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// Monitor names: one per resource a job could leak.
const (
	MonRSS        = "rss_bytes"         // resident set size of the process (/proc/self/status VmRSS)
	MonGoroutines = "goroutines"        // runtime.NumGoroutine
	MonFDs        = "open_fds"          // entries of /proc/self/fd
	MonTempFiles  = "temp_files"        // files under the run's temporary directory
	MonDeviceUsed = "device_used_bytes" // cuMemGetInfo total-free (--device cuda only)
	MonAllocLive  = "alloc_live_bytes"  // the CUDA caching allocator's live bytes (--device cuda only)
	MonModules    = "cuda_modules"      // kernels loaded in the process's CUDA contexts (--device cuda only)
)

// Allowances is how much a monitor may grow over a soak before monotone growth counts as a
// leak. They are sized to what a healthy run does on its own: the Go heap settling after the
// warm-up (RSS), a goroutine or fd the runtime or a backend opens lazily, the caching
// allocator growing to its working set. A real leak (one buffer, goroutine or fd per graph)
// passes them within seconds.
var Allowances = map[string]float64{
	MonRSS:        64 << 20,
	MonGoroutines: 16,
	MonFDs:        16,
	MonTempFiles:  16,
	MonDeviceUsed: 256 << 20,
	MonAllocLive:  64 << 20,
	// A job's pool compiles its kernels in the warm-up; a soak loads none after that unless
	// the module cache misses (a key that changes per run) or kernels are re-loaded per run.
	MonModules: 64,
}

// Sample is one reading of every monitor at time T (seconds since the soak started).
type Sample struct {
	T      float64            `json:"t"`
	Phase  string             `json:"phase"` // before, during, after
	Values map[string]float64 `json:"values"`
}

// Sampler reads the monitors of this process. TempDir, when set, is the directory whose files
// are counted; Device, when set, adds the device monitors.
type Sampler struct {
	TempDir string
	Device  func() (map[string]float64, error) // device monitors by name
}

// Read takes one sample.
func (s Sampler) Read(t float64, phase string) Sample {
	v := map[string]float64{MonGoroutines: float64(runtime.NumGoroutine())}
	if rss, ok := readRSS(); ok {
		v[MonRSS] = rss
	}
	if n, err := os.ReadDir("/proc/self/fd"); err == nil {
		v[MonFDs] = float64(len(n))
	}
	if s.TempDir != "" {
		v[MonTempFiles] = float64(countFiles(s.TempDir))
	}
	if s.Device != nil {
		if dv, err := s.Device(); err == nil {
			for k, x := range dv {
				v[k] = x
			}
		}
	}
	return Sample{T: t, Phase: phase, Values: v}
}

// readRSS reads VmRSS from /proc/self/status, in bytes.
func readRSS() (float64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "VmRSS:") {
			continue
		}
		fields := strings.Fields(line[len("VmRSS:"):])
		if len(fields) < 1 {
			return 0, false
		}
		kb, err := strconv.ParseFloat(fields[0], 64)
		return kb * 1024, err == nil
	}
	return 0, false
}

func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// Leak is the verdict on one monitor's series from one process.
type Leak struct {
	Monitor string `json:"monitor"`
	Source  string `json:"source"` // "process" (goroutines mode) or "job N" (processes mode)
	Samples int    `json:"samples"`
	// Before and After are the readings at the soak's start and end; Growth is the rise of
	// the floor (first window's minimum to the last window's), Slope the least-squares slope
	// over all samples, per minute.
	Before    float64 `json:"before"`
	After     float64 `json:"after"`
	Growth    float64 `json:"growth"`
	Slope     float64 `json:"slope_per_min"`
	Allowance float64 `json:"allowance"`
	// LateGrowth is the rise of the floor after the first window (the warm-up).
	LateGrowth float64 `json:"late_growth"`
	Monotone   bool    `json:"monotone"`
	Leak       bool    `json:"leak"`
}

// Windows is how many windows a soak's samples are split into for the leak rule.
const Windows = 4

// MinSamples is the fewest samples a series needs to be judged; a shorter one is reported,
// never called a leak.
const MinSamples = 2 * Windows

// Judge applies the leak rule to one monitor's samples (in time order): the samples are split
// into Windows windows of equal count and each window's minimum taken (a leak raises the floor;
// garbage-collector sawtooth and bursts do not), and the series leaks when those minima never
// fall (monotone), the last exceeds the first by more than the allowance, and the floor still
// rises after the first window by more than half the allowance. The last condition tells a
// leak, which keeps growing, from a step during the warm-up: caches filling, or on a GPU the
// neighbours' contexts appearing in the device-wide used memory while their processes start
// (measured: in an 8-process 10-minute soak the first three jobs' device_used_bytes rose by
// 0.4-3.1 GB in their first window, then stayed flat to the byte).
func Judge(monitor, source string, samples []Sample) Leak {
	var ts, vs []float64
	for _, s := range samples {
		if v, ok := s.Values[monitor]; ok {
			ts, vs = append(ts, s.T), append(vs, v)
		}
	}
	l := Leak{Monitor: monitor, Source: source, Samples: len(vs), Allowance: Allowances[monitor]}
	if len(vs) == 0 {
		return l
	}
	l.Before, l.After = vs[0], vs[len(vs)-1]
	l.Slope = slope(ts, vs) * 60
	if len(vs) < MinSamples {
		return l
	}
	mins := make([]float64, Windows)
	for w := range Windows {
		lo, hi := w*len(vs)/Windows, (w+1)*len(vs)/Windows
		mins[w] = math.Inf(1)
		for _, v := range vs[lo:hi] {
			mins[w] = math.Min(mins[w], v)
		}
	}
	l.Monotone = sort.Float64sAreSorted(mins)
	l.Growth = mins[Windows-1] - failpoint.Pick(failpoint.JudgeStressLeakFromSecondWindow, mins[0], mins[1])
	l.LateGrowth = mins[Windows-1] - mins[1]
	l.Leak = l.Monotone && l.Growth > l.Allowance && l.LateGrowth > l.Allowance/2
	return l
}

// slope is the least-squares slope of v over t (per unit of t); 0 for fewer than 2 points.
func slope(t, v []float64) float64 {
	n := float64(len(t))
	if len(t) < 2 {
		return 0
	}
	var st, sv float64
	for i := range t {
		st, sv = st+t[i], sv+v[i]
	}
	mt, mv := st/n, sv/n
	var num, den float64
	for i := range t {
		num += (t[i] - mt) * (v[i] - mv)
		den += (t[i] - mt) * (t[i] - mt)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// JudgeAll judges every monitor present in samples.
func JudgeAll(source string, samples []Sample) []Leak {
	seen := map[string]bool{}
	for _, s := range samples {
		for k := range s.Values {
			seen[k] = true
		}
	}
	names := make([]string, 0, len(seen))
	for k := range seen {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]Leak, 0, len(names))
	for _, k := range names {
		out = append(out, Judge(k, source, samples))
	}
	return out
}

// since is seconds since t0.
func since(t0 time.Time) float64 { return time.Since(t0).Seconds() }
