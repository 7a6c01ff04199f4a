package pins

import (
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Suite is the suite name under which pinned cases are stored and acknowledged in the results
// store: the same as `tessera-qa run`'s determinism job, whose results carry the same digests,
// so one acknowledgement covers both.
const Suite = "determinism"

// Ack is an acknowledgement from the results store (`tessera-qa report ack repro`) that names
// a case of Suite on one device class and the new digest it accepts.
type Ack struct {
	Case   string
	Digest string // the full combined digest
	Reason string
	By     string
	Time   time.Time
}

// AckCommand is the command that accepts digest as case's new pinned digest on class. The
// digest is shortened to a prefix, which the ack command resolves.
func AckCommand(class, name, digest string) string {
	return fmt.Sprintf("tessera-qa report ack repro --suite %s --case %s --device-class %s --digest %s --reason WHY",
		Suite, name, class, digest[:min(16, len(digest))])
}

// Refresh returns the pin file for rec: rec's digests, where every pin that changed carries
// the acknowledgement that accepted its new digest (Accepted), and unchanged pins keep theirs.
// A change no ack in acks covers is an E_NONDETERMINISTIC error listing every such case, and
// nothing is to be written. Cases added to or removed from the catalogue need no ack: the
// catalogue's own diff shows them. Without an old file (hasOld false) rec is the first
// recording.
func Refresh(old File, hasOld bool, rec Recording, acks []Ack) (File, Diff, error) {
	diff := Compare(old, rec.Digests)
	if err := rec.err(); err != nil {
		return File{}, diff, err
	}
	if hasOld && old.DeviceClass != rec.DeviceClass {
		return File{}, diff, errs.New(errs.Input, "pins: the file pins %s, the run was on %s", old.DeviceClass, rec.DeviceClass)
	}
	f := File{Format: Format, Version: Version, DeviceClass: rec.DeviceClass, Cases: map[string]Pin{}}
	for name, outs := range rec.Digests {
		f.Cases[name] = Pin{Outputs: slices.Clone(outs), Accepted: old.Cases[name].Accepted}
	}
	if !hasOld {
		return f, diff, f.Check()
	}
	latest := map[[2]string]Ack{} // (case, digest) -> the newest ack
	for _, a := range acks {
		k := [2]string{a.Case, a.Digest}
		if prev, ok := latest[k]; !ok || a.Time.After(prev.Time) {
			latest[k] = a
		}
	}
	var refused []string
	for _, c := range diff.Changed {
		a, ok := latest[[2]string{c.Case, c.GotDigest()}]
		if !ok {
			refused = append(refused, fmt.Sprintf("%s (pinned %s, got %s)", c.Case, short(c.PinnedDigest()), short(c.GotDigest())))
			continue
		}
		p := f.Cases[c.Case]
		p.Accepted = &Accepted{Previous: c.PinnedDigest(), Reason: oneLine(a.Reason, maxText), By: oneLine(a.By, maxName),
			Date: a.Time.UTC().Format(time.DateOnly)}
		f.Cases[c.Case] = p
	}
	if len(refused) > 0 {
		n := len(refused)
		if n > maxListed {
			refused = append(refused[:maxListed], fmt.Sprintf("and %d more", n-maxListed))
		}
		return File{}, diff, errs.New(errs.Nondeterministic,
			"%d pinned digests on %s changed with no acknowledgement: %s; if the change is on purpose, accept each with `%s` and pin again",
			n, rec.DeviceClass, strings.Join(refused, ", "), AckCommand(rec.DeviceClass, "CASE", "DIGEST"))
	}
	return f, diff, f.Check()
}

// err refuses to pin a recording in which some case did not run, but for the cases of an op
// the device's code generator declares not lowered (ptx.NotLowered): they stay unpinned and
// listed in the class's .awaiting file.
func (rec Recording) err() error {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(rec.Errors)) {
		if !strings.Contains(rec.Errors[name], ptx.NotLowered) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return errs.New(errs.Internal, "pins %s: %d catalogue cases did not run, nothing pinned; first %s: %s",
		rec.DeviceClass, len(names), names[0], rec.Errors[names[0]])
}

// maxListed keeps the refusal one readable line; the caller prints every case (Diff).
const maxListed = 5

func short(d string) string { return d[:min(16, len(d))] }

// oneLine makes free text from the results store fit the file: one line, printable, bounded.
func oneLine(s string, max int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }), " ")
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "")
	}
	if s == "" {
		s = "unknown"
	}
	return s
}
