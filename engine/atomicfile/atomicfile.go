// Package atomicfile replaces a file in one step: readers (a test embedding the directory, the
// reporter, a CI upload, another process sharing a cache) see the old file or the whole new
// one, never a part, and a failure leaves the old file untouched and no temporary behind.
package atomicfile

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
)

// WriteFunc writes what write produces to a temporary file beside path, makes it 0644
// (CreateTemp makes 0600; these files are shared data), syncs it (the rename must not land
// before the bytes do) and renames it over path.
func WriteFunc(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	werr := write(f)
	if werr == nil {
		werr = f.Chmod(0o644)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		os.Remove(f.Name())
	}
	return werr
}

// Write is WriteFunc for bytes already in memory.
func Write(path string, data []byte) error {
	return WriteFunc(path, func(w io.Writer) error {
		_, err := io.Copy(w, bytes.NewReader(data))
		return err
	})
}
