package profiling

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// slack is how far (in microseconds, so 1 ns) an end may pass its parent's end after the
// float conversion of integer nanoseconds.
const slack = 1e-3

// maxSpanUS bounds a trace's timestamps: one day. A trace written in nanoseconds where
// microseconds are meant is 1000x too long and fails here.
const maxSpanUS = 86400e6

// ValidateFile validates a trace file (gzip is recognised by its magic bytes).
func ValidateFile(path string) (Stats, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Stats{}, errs.New(errs.Input, "trace %s: %v", path, err)
	}
	st, err := Validate(data)
	if err != nil {
		return st, errs.New(errs.Input, "trace %s: %v", path, err)
	}
	return st, nil
}

// ValidateDir validates every *.trace.json and *.trace.json.gz under dir and returns how many.
func ValidateDir(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !(strings.HasSuffix(p, ".trace.json") || strings.HasSuffix(p, ".trace.json.gz")) {
			return nil
		}
		n++
		_, err = ValidateFile(p)
		return err
	})
	return n, err
}

// Stats says what a valid trace holds.
type Stats struct {
	Events, Slices, Flows, Counters int
	Processes                       map[int]string
	Threads                         map[[2]int]string
	// SliceNames counts the complete events by category.
	Categories map[string]int
}

type rawEvent struct {
	Name *string         `json:"name"`
	Cat  string          `json:"cat"`
	Ph   *string         `json:"ph"`
	TS   *float64        `json:"ts"`
	Dur  *float64        `json:"dur"`
	PID  *float64        `json:"pid"`
	TID  *float64        `json:"tid"`
	ID   json.RawMessage `json:"id"`
	BP   string          `json:"bp"`
	Args json.RawMessage `json:"args"`
}

// Validate checks the rules Perfetto's JSON importer and the issue rely on:
//   - the document is {"traceEvents": [...]} (displayTimeUnit, if given, "ms" or "ns"), every
//     event has a name, a phase among X M C s f, integer pid and tid, finite ts in [0, 1 day] us;
//   - X events have dur >= 0, and on each (pid, tid) track they nest: two slices either are
//     disjoint or one contains the other (1 ns of rounding allowed);
//   - M events are process_name/thread_name with a string args.name, and every track with
//     a slice belongs to a named process and a named thread;
//   - C events have numeric args;
//   - flow events: each id has exactly one "s" and one "f", same cat and name, s not after f,
//     f binds to its enclosing slice ("bp":"e"), and each end lies inside a slice of its track.
func Validate(data []byte) (Stats, error) {
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return Stats{}, fmt.Errorf("gzip: %v", err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return Stats{}, fmt.Errorf("gzip: %v", err)
		}
	}
	var doc struct {
		TraceEvents     *[]rawEvent `json:"traceEvents"`
		DisplayTimeUnit string      `json:"displayTimeUnit"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return Stats{}, fmt.Errorf("not a trace document: %v", err)
	}
	if doc.TraceEvents == nil {
		return Stats{}, fmt.Errorf("no traceEvents array")
	}
	if u := doc.DisplayTimeUnit; u != "" && u != "ms" && u != "ns" {
		return Stats{}, fmt.Errorf("displayTimeUnit %q (want ms or ns)", u)
	}
	st := Stats{Processes: map[int]string{}, Threads: map[[2]int]string{}, Categories: map[string]int{}}
	type slice struct {
		start, end float64
		name       string
	}
	tracks := map[[2]int][]slice{}
	type flowEnd struct {
		ev    rawEvent
		track [2]int
		at    int
	}
	flows := map[string][]flowEnd{}
	for i, e := range *doc.TraceEvents {
		st.Events++
		where := fmt.Sprintf("event %d", i)
		if e.Name == nil || *e.Name == "" || e.Ph == nil {
			return st, fmt.Errorf("%s: name and ph are required", where)
		}
		where += fmt.Sprintf(" (%s %q)", *e.Ph, *e.Name)
		if e.PID == nil || *e.PID != math.Trunc(*e.PID) || (e.TID != nil && *e.TID != math.Trunc(*e.TID)) {
			return st, fmt.Errorf("%s: pid and tid must be integers", where)
		}
		pid, tid := int(*e.PID), 0
		if e.TID != nil {
			tid = int(*e.TID)
		}
		track := [2]int{pid, tid}
		if *e.Ph != "M" {
			if e.TS == nil || math.IsNaN(*e.TS) || *e.TS < 0 || *e.TS > maxSpanUS {
				return st, fmt.Errorf("%s: ts must be a number of microseconds in [0, %g]", where, maxSpanUS)
			}
		}
		switch *e.Ph {
		case "X":
			if e.Dur == nil || math.IsNaN(*e.Dur) || *e.Dur < 0 || *e.Dur > maxSpanUS {
				return st, fmt.Errorf("%s: dur must be a number of microseconds >= 0", where)
			}
			tracks[track] = append(tracks[track], slice{*e.TS, *e.TS + *e.Dur, *e.Name})
			st.Slices++
			st.Categories[e.Cat]++
		case "M":
			var args struct {
				Name *string `json:"name"`
			}
			if err := json.Unmarshal(e.Args, &args); err != nil || args.Name == nil || *args.Name == "" {
				return st, fmt.Errorf("%s: metadata needs args.name", where)
			}
			switch *e.Name {
			case "process_name":
				st.Processes[pid] = *args.Name
			case "thread_name":
				st.Threads[track] = *args.Name
			default:
				return st, fmt.Errorf("%s: metadata must be process_name or thread_name", where)
			}
		case "C":
			var args map[string]any
			if err := json.Unmarshal(e.Args, &args); err != nil || len(args) == 0 {
				return st, fmt.Errorf("%s: a counter needs args", where)
			}
			for k, v := range args {
				if _, ok := v.(float64); !ok {
					return st, fmt.Errorf("%s: counter series %q is not a number", where, k)
				}
			}
			st.Counters++
		case "s", "f":
			var id any
			if len(e.ID) == 0 || json.Unmarshal(e.ID, &id) != nil || id == nil || e.Cat == "" {
				return st, fmt.Errorf("%s: a flow event needs an id and a cat", where)
			}
			if *e.Ph == "f" && e.BP != "e" {
				return st, fmt.Errorf("%s: a flow's end must bind to its enclosing slice (\"bp\":\"e\")", where)
			}
			key := e.Cat + "\x00" + string(e.ID)
			flows[key] = append(flows[key], flowEnd{ev: e, track: track, at: i})
		default:
			return st, fmt.Errorf("%s: phase %q is not one this trace writer uses (X M C s f)", where, *e.Ph)
		}
	}
	for track, ss := range tracks {
		if _, ok := st.Processes[track[0]]; !ok {
			return st, fmt.Errorf("pid %d has slices but no process_name", track[0])
		}
		if _, ok := st.Threads[track]; !ok {
			return st, fmt.Errorf("pid %d tid %d has slices but no thread_name", track[0], track[1])
		}
		sort.SliceStable(ss, func(i, j int) bool {
			if ss[i].start != ss[j].start {
				return ss[i].start < ss[j].start
			}
			return ss[i].end > ss[j].end
		})
		var stack []slice
		for _, s := range ss {
			for len(stack) > 0 && stack[len(stack)-1].end <= s.start+slack {
				stack = stack[:len(stack)-1] // the enclosing slice ended before s starts
			}
			if len(stack) > 0 && s.end > stack[len(stack)-1].end+slack {
				top := stack[len(stack)-1]
				return st, fmt.Errorf("pid %d tid %d: slice %q [%g, %g] overlaps %q [%g, %g] without nesting",
					track[0], track[1], s.name, s.start, s.end, top.name, top.start, top.end)
			}
			stack = append(stack, s)
		}
		tracks[track] = ss
	}
	inside := func(track [2]int, ts float64) bool {
		for _, s := range tracks[track] {
			if s.start-slack <= ts && ts <= s.end+slack {
				return true
			}
		}
		return false
	}
	for _, ends := range flows {
		if len(ends) != 2 || *ends[0].ev.Ph != "s" || *ends[1].ev.Ph != "f" {
			return st, fmt.Errorf("flow %s (%s): want one s then one f, got %d events", string(ends[0].ev.ID), ends[0].ev.Cat, len(ends))
		}
		s, f := ends[0], ends[1]
		if *s.ev.Name != *f.ev.Name || *s.ev.TS > *f.ev.TS+slack {
			return st, fmt.Errorf("flow %s: s and f differ in name or s comes after f", string(s.ev.ID))
		}
		for _, e := range ends {
			if !inside(e.track, *e.ev.TS) {
				return st, fmt.Errorf("flow %s: its %s end at %g lies in no slice of pid %d tid %d", string(e.ev.ID), *e.ev.Ph, *e.ev.TS, e.track[0], e.track[1])
			}
		}
		st.Flows++
	}
	return st, nil
}
