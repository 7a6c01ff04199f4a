// Package cli is the tessera-qa command line: one file per verb, each parsing flags and
// printing, with the work done by packages under engine/, harness/ and golden/. Main runs a
// command line in-process, so tests drive it exactly as a user would.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Exit codes (design.md §9).
const (
	ExitOK      = 0 // every check passed
	ExitFailed  = 1 // a check failed
	ExitUsage   = 2 // bad usage or bad input (and internal errors)
	ExitMissing = 3 // an environment the user asked for explicitly is missing
)

// Main runs one tessera-qa command line and returns its exit code. Every error reaches the
// user as one line "tessera-qa: E_CODE: ..." on stderr; a panic anywhere below is reported the
// same way (E_INTERNAL), never as a stack trace.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			printErr(stderr, errs.New(errs.Internal, "panic: %v (a tessera-qa bug; please report it with the command line)", r))
			code = ExitUsage
		}
	}()
	root := newRoot(&env{stdin: stdin, stdout: stdout, stderr: stderr})
	// A nil slice would make cobra read os.Args.
	root.SetArgs(append([]string{}, args...))
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitOK
	}
	var x *exitError
	if errors.As(err, &x) {
		if x.err != nil {
			printErr(stderr, x.err)
		}
		return x.code
	}
	// Anything else came from cobra before a verb ran: an unknown verb or flag, a wrong number
	// of arguments. One line, and where to read more, instead of cobra's usage dump.
	path := root.Name()
	if cmd != nil {
		path = cmd.CommandPath()
	}
	printErr(stderr, errs.New(errs.Input, "%s (see %s --help)", err, path))
	return ExitUsage
}

func printErr(w io.Writer, err error) {
	fmt.Fprintln(w, "tessera-qa: "+errs.Line(err))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// exitError ends a verb with an exit code; err, when set, is printed as the one error line.
// A nil err means the verb already said what went wrong (a failed check prints its report).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// failed ends a verb with exit 1 after it printed its own report.
func failed() error { return &exitError{code: ExitFailed} }

// exitCode maps an error's code to the exit code users and CI scripts rely on.
func exitCode(err error) int {
	switch errs.CodeOf(err) {
	case errs.NoDevice:
		// Only reachable when the user named the backend: `run` falls back on its own.
		return ExitMissing
	case errs.Input, errs.Parse, errs.Shape, errs.DType, errs.Unsupported, errs.Internal:
		return ExitUsage
	}
	// The engine failed at run time (E_OOM, E_ILLEGAL_ADDRESS, E_TIMEOUT, E_NAN_INF, ...):
	// the thing under test misbehaved, which is a failed check.
	return ExitFailed
}

// verb wraps a verb's body so that every error it returns carries an exit code; Main can then
// tell a verb's errors from cobra's usage errors.
func verb(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		if err == nil {
			return nil
		}
		var x *exitError
		if errors.As(err, &x) {
			return err
		}
		return &exitError{code: exitCode(err), err: err}
	}
}

// usage is an error in how a verb was called that cobra itself cannot see.
func usage(cmd *cobra.Command, format string, args ...any) error {
	err := errs.New(errs.Input, format+" (see %s --help)", append(args, cmd.CommandPath())...)
	return &exitError{code: ExitUsage, err: err}
}
