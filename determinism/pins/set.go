package pins

import (
	"fmt"
	"os"
	"strings"
)

// Set is a family of digests pinned per device class outside the golden catalogue (the
// collectives catalogue, sharded programs, training runs): one determinism/pins file per class in
// Dir, recorded when the environment variable RecordEnv is 1.
type Set struct {
	Name      string // what is pinned, for messages: "the collectives catalogue"
	Dir       string // relative to the running test's directory
	RecordEnv string
	// Record is the command, from the repository root, that records this set's file.
	Record string
}

// Outcome is what Check did: recorded a file, skipped for want of one, or compared.
type Outcome struct {
	Recorded string // the path written when recording
	Skip     string // why nothing was compared: no file for this class
	Diff     Diff
	Problem  string // "" when the digests equal the pins
}

// Check compares got (case -> output digests) with the set's file for class, or writes that
// file when RecordEnv is 1.
func (s Set) Check(class string, got map[string][]string) (Outcome, error) {
	if os.Getenv(s.RecordEnv) == "1" {
		f := File{Format: Format, Version: Version, DeviceClass: class, Cases: map[string]Pin{}}
		for k, d := range got {
			f.Cases[k] = Pin{Outputs: d}
		}
		p, err := Save(s.Dir, f)
		return Outcome{Recorded: p}, err
	}
	f, ok, err := Load(os.DirFS(s.Dir), s.Dir, class)
	if err != nil {
		return Outcome{}, err
	}
	if !ok {
		return Outcome{Skip: fmt.Sprintf("no pinned digests of %s for class %s; record them with %s", s.Name, class, s.Record)}, nil
	}
	o := Outcome{Diff: Compare(f, got)}
	if !o.Diff.Empty() {
		var lines []string
		for _, c := range o.Diff.Changed[:min(10, len(o.Diff.Changed))] {
			lines = append(lines, c.Case+": pinned "+c.PinnedDigest()[:16]+", got "+c.GotDigest()[:16])
		}
		o.Problem = fmt.Sprintf("%s on %s: %d changed, %d added, %d missing (%d same):\n%s\nadded: %v\nmissing: %v\nif the change is on purpose, record again: %s",
			s.Name, class, len(o.Diff.Changed), len(o.Diff.Added), len(o.Diff.Missing), o.Diff.Same, strings.Join(lines, "\n"),
			o.Diff.Added[:min(5, len(o.Diff.Added))], o.Diff.Missing[:min(5, len(o.Diff.Missing))], s.Record)
	}
	return o, nil
}
