package pins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/tessera-qa/tessera-qa/engine/atomicfile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Format and Version head every pin file; a reader refuses other formats and newer versions.
const (
	Format  = "tessera.pins"
	Version = 1
)

// File is the pinned digests of one device class.
type File struct {
	Format      string `json:"format"`
	Version     int    `json:"version"`
	DeviceClass string `json:"device_class"`
	// Cases maps a catalogue case name to its pin. A map is written with sorted keys, so the
	// file is the same bytes for the same pins.
	Cases map[string]Pin `json:"cases"`
}

// Pin is one case's output digests (tensor.Digest of each output, in graph order).
type Pin struct {
	Outputs []string `json:"outputs"`
	// Accepted records the last change of this pin that a person acknowledged.
	Accepted *Accepted `json:"accepted,omitempty"`
}

// Accepted is the acknowledgement under which a pin last changed.
type Accepted struct {
	// Previous is the digest (Pin.Digest) the pin had before.
	Previous string `json:"previous"`
	Reason   string `json:"reason"`
	By       string `json:"by"`
	// Date is the acknowledgement's day, YYYY-MM-DD.
	Date string `json:"date"`
}

// Digest is the case's combined digest (harness.CombineDigests), the one the results store
// keeps and `report ack repro --digest` names.
func (p Pin) Digest() string { return harness.CombineDigests(p.Outputs) }

// FileName is the pin file of a device class inside the pins directory: the class with its
// slashes made underscores ("cpu/amd64+fma" -> "cpu_amd64+fma.json").
func FileName(class string) string { return strings.ReplaceAll(class, "/", "_") + ".json" }

// Limits of what Parse accepts: far above any real file, low enough that a corrupt one cannot
// make a reader allocate without bound.
const (
	maxCases   = 100000
	maxOutputs = 64
	maxName    = 200
	maxText    = 2000
)

// Parse decodes and checks a pin file: the format and version, the device class, and every
// case's name and digests. Anything wrong is one E_INPUT line naming the field.
func Parse(data []byte) (File, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return File{}, errs.New(errs.Input, "pins: not a pin file: %v", err)
	}
	if dec.More() {
		return File{}, errs.New(errs.Input, "pins: data after the pin file's JSON object")
	}
	if err := f.Check(); err != nil {
		return File{}, err
	}
	return f, nil
}

// Check reports the first thing wrong with f as one E_INPUT line.
func (f File) Check() error {
	switch {
	case f.Format != Format:
		return errs.New(errs.Input, "pins: format %q, want %q", clip(f.Format), Format)
	case f.Version < 1 || f.Version > Version:
		return errs.New(errs.Input, "pins: version %d, this build reads 1..%d", f.Version, Version)
	}
	if err := CheckClass(f.DeviceClass); err != nil {
		return err
	}
	if len(f.Cases) == 0 {
		return errs.New(errs.Input, "pins %s: no cases", f.DeviceClass)
	}
	if len(f.Cases) > maxCases {
		return errs.New(errs.Input, "pins %s: %d cases (limit %d)", f.DeviceClass, len(f.Cases), maxCases)
	}
	for name, p := range f.Cases {
		if err := checkName(name); err != nil {
			return errs.New(errs.Input, "pins %s: case name %q: %v", f.DeviceClass, clip(name), err)
		}
		if err := p.check(); err != nil {
			return errs.New(errs.Input, "pins %s: case %s: %v", f.DeviceClass, name, err)
		}
	}
	return nil
}

// CheckClass accepts the device class strings the backends make ("cpu/amd64+fma/v3",
// "cuda/sm_90"): letters, digits and "/_+.-", which also makes FileName a safe file name.
func CheckClass(class string) error {
	if class == "" || len(class) > maxName {
		return errs.New(errs.Input, "pins: device class %q: want 1 to %d characters", clip(class), maxName)
	}
	for _, r := range class {
		if !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("/_+.-", r))) {
			return errs.New(errs.Input, "pins: device class %q: character %q (want letters, digits and /_+.-)", clip(class), r)
		}
	}
	return nil
}

func checkName(s string) error {
	if s == "" || len(s) > maxName {
		return errors.New("want 1 to 200 characters")
	}
	for _, r := range s {
		if r <= ' ' || r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return errors.New("blank or control character")
		}
	}
	return nil
}

func (p Pin) check() error {
	if len(p.Outputs) == 0 || len(p.Outputs) > maxOutputs {
		return errors.New("want 1 to 64 output digests")
	}
	for i, d := range p.Outputs {
		if d != harness.NilDigest && !isHex64(d) {
			return fmt.Errorf("output %d: digest %q is not 64 lowercase hex digits", i, clip(d))
		}
	}
	if a := p.Accepted; a != nil {
		switch {
		case !isHex64(a.Previous):
			return fmt.Errorf("accepted.previous %q is not 64 lowercase hex digits", clip(a.Previous))
		case !isLine(a.Reason, maxText):
			return errors.New("accepted.reason: want one non-empty line of printable text")
		case !isLine(a.By, maxName):
			return fmt.Errorf("accepted.by %q: want one non-empty line of printable text", clip(a.By))
		case !isDate(a.Date):
			return fmt.Errorf("accepted.date %q is not YYYY-MM-DD", clip(a.Date))
		}
	}
	return nil
}

// Marshal checks f and encodes it: indented, keys sorted, one trailing newline.
func Marshal(f File) ([]byte, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "pins %s: encode", f.DeviceClass)
	}
	return buf.Bytes(), nil
}

// Load reads the pin file of class from fsys (golden.Pins() or os.DirFS of a pins
// directory); root names fsys's directory in messages (golden.PinsRoot, or the directory).
// ok is false when there is none; a file that is there but bad, or that pins another class,
// is an E_INPUT error naming it.
func Load(fsys fs.FS, root, class string) (f File, ok bool, err error) {
	if err := CheckClass(class); err != nil {
		return File{}, false, err
	}
	name := FileName(class)
	data, err := fs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return File{}, false, nil
	}
	if err != nil {
		return File{}, false, errs.Wrap(errs.Input, err, "pins: read %s", name)
	}
	if f, err = Parse(data); err != nil {
		return File{}, false, errs.Wrap(errs.Input, err, "%s", path.Join(root, name))
	}
	if f.DeviceClass != class {
		return File{}, false, errs.New(errs.Input, "%s pins device class %s, want %s", path.Join(root, name), f.DeviceClass, class)
	}
	return f, true, nil
}

// Save writes f to dir/FileName(f.DeviceClass), whole or not at all, and returns the path.
func Save(dir string, f File) (string, error) {
	data, err := Marshal(f)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, FileName(f.DeviceClass))
	if err := atomicfile.Write(p, data); err != nil {
		return "", errs.Wrap(errs.Input, err, "pins: write %s", p)
	}
	return p, nil
}

// isLine: non-empty, not only blanks, at most max bytes, printable (spaces allowed).
func isLine(s string, max int) bool {
	if strings.TrimSpace(s) == "" || len(s) > max {
		return false
	}
	for _, r := range s {
		if r != ' ' && (r == unicode.ReplacementChar || !unicode.IsPrint(r)) {
			return false
		}
	}
	return true
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func isDate(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for i, c := range []byte(s) {
		if i != 4 && i != 7 && !('0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
