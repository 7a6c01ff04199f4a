package differential

import (
	"embed"
	"os"
	"path/filepath"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// scripts holds the oracle scripts; they are written to a temporary directory at Start, so the
// binary needs nothing beside itself but a Python with the framework.
//
//go:embed oracles/*.py
var scripts embed.FS

// Frameworks lists the oracles this build knows, each with its script.
var Frameworks = map[string]string{
	"torch": "torch_oracle.py",
	"jax":   "jax_oracle.py",
}

// Script returns the embedded source of a file under oracles/ (for docs and tests).
func Script(name string) ([]byte, error) { return scripts.ReadFile("oracles/" + name) }

// writeScripts copies every oracle script into a fresh temporary directory.
func writeScripts() (string, error) {
	dir, err := os.MkdirTemp("", "tessera-oracle-")
	if err != nil {
		return "", errs.New(errs.Input, "oracle: temporary directory: %v", err)
	}
	entries, _ := scripts.ReadDir("oracles")
	for _, e := range entries {
		b, _ := scripts.ReadFile("oracles/" + e.Name())
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			os.RemoveAll(dir)
			return "", errs.New(errs.Input, "oracle: write %s: %v", e.Name(), err)
		}
	}
	return dir, nil
}
