package harness

import (
	"bytes"
	"encoding/json"

	"github.com/tessera-qa/tessera-qa/engine/atomicfile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// writeAtomic replaces path with data in one step (engine/atomicfile).
func writeAtomic(path string, data []byte) error {
	if err := atomicfile.Write(path, data); err != nil {
		return errs.New(errs.Input, "write %s: %v", path, err)
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
