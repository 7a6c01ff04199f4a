package harness

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// writeAtomic writes data to a temporary file beside path, syncs it and renames it over path,
// so that a reader (the reporter, a CI upload) sees the old file or the whole new one.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return errs.New(errs.Input, "write %s: %v", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(0o644) // CreateTemp makes 0600; results are meant to be shared
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return errs.New(errs.Input, "write %s: %v", path, werr)
	}
	return nil
}

// indentJSON encodes v for people and machines alike: indented, and without HTML escaping, so
// that reasons read "|diff| 2 > 1" rather than "\u003e".
func indentJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
