package parse

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Limits on what an ingested file may hold. Reports come from anywhere (a fork's CI, a file a
// person edited): these keep one bad file from filling the store or upsetting PostgreSQL, which
// refuses NUL bytes in text.
const (
	MaxFileBytes = 1 << 30 // a nightly of 10,000 results is ~30 MB
	MaxRows      = 5_000_000
	maxIdent     = 1024    // names, digests, device classes
	maxText      = 8 << 10 // reasons and failure messages are cut here
	maxSamples   = 100_000 // repetitions of one bench row
	maxNumber    = 1e15    // milliseconds, ratios, rates
)

// Checker collects the first problem of a file, naming where it is.
type Checker struct {
	file string
	err  error
}

// NewChecker starts checking file.
func NewChecker(file string) *Checker { return &Checker{file: file} }

// Err is the first problem found, nil if none.
func (c *Checker) Err() error { return c.err }

// Failf records a problem (only the first is kept).
func (c *Checker) Failf(format string, args ...any) { c.failf(format, args...) }

// Ident checks a name-like field; see ident.
func (c *Checker) Ident(where, field, v string, required bool) string {
	return c.ident(where, field, v, required)
}

// Text cleans free text for the store; see text.
func Text(v string) string { return text(v) }

func (c *Checker) failf(format string, args ...any) {
	if c.err == nil {
		c.err = errs.New(errs.Input, "report %s: "+format, append([]any{c.file}, args...)...)
	}
}

// ident checks a name-like field: bounded, no control characters, valid UTF-8. required: it
// may not be empty.
func (c *Checker) ident(where, field, v string, required bool) string {
	switch {
	case v == "" && required:
		c.failf("%s: %s is missing", where, field)
	case len(v) > maxIdent:
		c.failf("%s: %s is %d bytes long (limit %d)", where, field, len(v), maxIdent)
	case !utf8.ValidString(v):
		c.failf("%s: %s is not valid UTF-8", where, field)
	case strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		c.failf("%s: %s %q contains control characters", where, field, clip(v))
	}
	return v
}

// text cleans a free-text field: NULs are replaced (PostgreSQL cannot store them), invalid
// UTF-8 is repaired and long text is cut, so a long failure message never loses a report.
func text(v string) string {
	if strings.IndexByte(v, 0) >= 0 {
		v = strings.ReplaceAll(v, "\x00", "\uFFFD")
	}
	if !utf8.ValidString(v) {
		v = strings.ToValidUTF8(v, "\uFFFD")
	}
	if len(v) > maxText {
		cut := maxText
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + "…"
	}
	return v
}

// num checks a measurement: finite, >= 0, not absurd.
func (c *Checker) num(where, field string, v float64) float64 {
	if math.IsNaN(v) || v < 0 || v > maxNumber {
		c.failf("%s: %s = %g out of range [0, %g]", where, field, v, maxNumber)
	}
	return v
}

func (c *Checker) hex(where, field, v string) string {
	c.ident(where, field, v, false)
	for i := 0; i < len(v); i++ {
		if b := v[i]; !(b >= '0' && b <= '9' || b >= 'a' && b <= 'f') {
			c.failf("%s: %s %q is not lowercase hex", where, field, clip(v))
			break
		}
	}
	return v
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// decodeStrict decodes one JSON value into v and rejects trailing data. Errors name the byte
// offset (and line) where decoding stopped.
func decodeStrict(file string, data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return parseErr(file, data, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errs.New(errs.Parse, "report %s: trailing data after the JSON value at byte %d", file, dec.InputOffset())
	}
	return nil
}

func parseErr(file string, data []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errs.New(errs.Parse, "report %s: truncated JSON (%d bytes)", file, len(data))
	}
	if off >= 0 && off <= int64(len(data)) {
		line := 1 + bytes.Count(data[:off], []byte("\n"))
		return errs.New(errs.Parse, "report %s: line %d (byte %d): %v", file, line, off, err)
	}
	return errs.New(errs.Parse, "report %s: %v", file, err)
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}
