// Package errs carries the stable error codes users see (design.md §9). Every error that can
// reach a user is an *Error whose message is one line: "E_CODE: what was wrong, where".
package errs

import (
	"errors"
	"fmt"
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

// New returns an *Error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap attaches a code and context to a cause. A cause that already carries a code keeps it,
// so the innermost, most specific code wins.
func Wrap(code Code, err error, format string, args ...any) *Error {
	var inner *Error
	if errors.As(err, &inner) {
		code = inner.Code
		return &Error{Code: code, Msg: fmt.Sprintf(format, args...) + ": " + inner.Msg, Err: err}
	}
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...) + ": " + err.Error(), Err: err}
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
