// Package errs carries the stable error codes users see (design.md §9). Every error that can
// reach a user is an *Error whose message is one line: "E_CODE: what was wrong, where".
package errs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Code is a stable, documented error code.
type Code string

const (
	Shape            Code = "E_SHAPE"
	DType            Code = "E_DTYPE"
	Parse            Code = "E_PARSE"
	Input            Code = "E_INPUT"
	OOM              Code = "E_OOM"
	IllegalAddress   Code = "E_ILLEGAL_ADDRESS"
	Timeout          Code = "E_TIMEOUT"
	TimeoutComm      Code = "E_TIMEOUT_COMM"
	CommInit         Code = "E_COMM_INIT"
	Desync           Code = "E_DESYNC"
	NaNInf           Code = "E_NAN_INF"
	Nondeterministic Code = "E_NONDETERMINISTIC"
	NoDevice         Code = "E_NO_DEVICE"
	Unsupported      Code = "E_UNSUPPORTED"
	Checkpoint       Code = "E_CHECKPOINT"    // a checkpoint on disk is torn, corrupt or missing
	CacheCorrupt     Code = "E_CACHE_CORRUPT" // a cache file failed its parse or checksum; it was moved aside and rebuilt
	Deadlock         Code = "E_DEADLOCK"      // a schedule of sends and receives that can never finish (refused before it runs)
	SDC              Code = "E_SDC"           // a device's bits differ from the pinned known answer: silent data corruption
	Straggler        Code = "E_STRAGGLER"     // a rank computes below 0.7 of the median rank's speed (fail-slow); nothing failed
	Internal         Code = "E_INTERNAL"
)

// Error is a coded, single-line error.
type Error struct {
	Code Code
	Msg  string
	Err  error // optional cause, for errors.Is/As
}

func (e *Error) Error() string { return string(e.Code) + ": " + oneLine(e.Msg) }
func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error with a formatted message. An argument that is a coded error gives the
// result its code (the innermost, most specific code wins, as in Wrap) and is formatted without
// it, so a line never reads "E_INPUT: chaos: E_INPUT: ...".
func New(code Code, format string, args ...any) *Error {
	var cause error
	args = slices.Clone(args) // the caller's slice is not ours to edit
	for i, a := range args {
		err, ok := a.(error)
		if !ok {
			continue
		}
		var inner *Error
		if !errors.As(err, &inner) {
			continue
		}
		if cause == nil {
			cause, code = err, inner.Code
		}
		args[i] = uncoded(err)
	}
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// Wrap attaches a code and context to a cause. A cause that already carries a code keeps it,
// so the innermost, most specific code wins.
func Wrap(code Code, err error, format string, args ...any) *Error {
	e := New(code, format, args...)
	var inner *Error
	if errors.As(err, &inner) {
		e.Code = inner.Code
	}
	e.Msg += ": " + uncoded(err)
	e.Err = err
	return e
}

// Line is err as the one line users see, "E_CODE: what, where", with exactly one code: err's
// own (CodeOf), at the front, also when a plain fmt.Errorf wrapper put context before it.
func Line(err error) string {
	code := CodeOf(err)
	return string(code) + ": " + oneLine(uncoded(err))
}

// Message is err's text without its code: for lists of reasons that one coded line will carry.
func Message(err error) string { return oneLine(uncoded(err)) }

// uncoded is err's text without the code that CodeOf(err) names: an *Error's text starts with
// it, and a fmt.Errorf("context: %w", coded) wrapper carries it after its context.
func uncoded(err error) string {
	var inner *Error
	if !errors.As(err, &inner) {
		return err.Error()
	}
	text := err.Error()
	prefix := string(inner.Code) + ": "
	if i := strings.Index(text, prefix); i >= 0 {
		return text[:i] + text[i+len(prefix):]
	}
	return text
}

// CodeOf returns the code carried by err, or E_INTERNAL for an uncoded error, "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
