package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8/cwriter"

	"github.com/tessera-qa/tessera-qa/engine/atomicfile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// addJSONFlag registers --json, which every verb that reports results takes.
func addJSONFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "json", "", "also write the result as JSON to `FILE` ('-': stdout, and the human report moves to stderr)")
}

// human is where the human-readable report goes: stdout, unless the JSON document goes there,
// so that `--json -` output can be piped into a JSON reader untouched.
func (e *env) human(jsonPath string) io.Writer {
	if jsonPath == "-" {
		return e.stderr
	}
	return e.stdout
}

// writeJSON writes v to path ('-': stdout; "": nowhere). A file is written next to its final
// name and renamed into place, so a reader never sees half a document.
func (e *env) writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // reasons quote shapes and comparisons: keep '<' and '>' readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return errs.Wrap(errs.Internal, err, "encode JSON report")
	}
	b := buf.Bytes()
	if path == "-" {
		if _, err := e.stdout.Write(b); err != nil {
			return errs.Wrap(errs.Input, err, "write JSON report to stdout")
		}
		return nil
	}
	return writeFileAtomic(path, b)
}

func writeFileAtomic(path string, b []byte) error {
	if err := atomicfile.Write(path, b); err != nil {
		return errs.Wrap(errs.Input, err, "write %s", path)
	}
	return nil
}

// isTerminal reports whether w is a terminal (by mpb's own test, a terminal ioctl, so that
// /dev/null, itself a character device, does not count), where a live progress bar makes
// sense; pipes, files and test buffers get plain lines instead. A terminal that reports no
// width (some CI pseudo-terminals) gets plain lines too: mpb draws nothing there.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	cw := cwriter.New(f)
	width, _, err := cw.GetTermSize()
	return cw.IsTerminal() && err == nil && width > 0
}
