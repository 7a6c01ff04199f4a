package golden

import (
	"embed"
	"errors"
	"io/fs"
	"path"
	"testing/fstest"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// DataRoot is the data directory's path in the repository, used to name files in messages
// about the embedded data.
const DataRoot = "golden/data"

//go:embed data
var embedded embed.FS

// Data returns the golden files compiled into this binary, rooted at the data directory (so
// "matmul/bf16.golden" is a path in it): tests and the CLI find them from any working
// directory.
func Data() fs.FS {
	sub, err := fs.Sub(embedded, "data")
	if err != nil {
		panic("golden: embedded data: " + err.Error()) // "data" is a valid, embedded path
	}
	return sub
}

// display names a file of a data directory in messages.
func display(root, p string) string { return path.Join(root, p) }

// Load reads and decodes the golden file of (op, dtype) from fsys (Data() or os.DirFS of a
// data directory). Errors are coded one-liners naming the file.
func Load(fsys fs.FS, op string, dt numerics.DType) (*File, error) {
	return loadAt(fsys, DataRoot, FileName(op, dt))
}

// LoadAll reads the golden file of every (op, dtype) pair that has catalogue specs, in
// catalogue order.
func LoadAll(fsys fs.FS) ([]*File, error) {
	var out []*File
	for _, p := range catalogueFiles() {
		f, err := loadAt(fsys, DataRoot, p)
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
	return out, nil
}

func loadAt(fsys fs.FS, root, p string) (*File, error) {
	name := display(root, p)
	data, err := fs.ReadFile(fsys, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.New(errs.Input, "%s: missing; run `tessera-qa golden update`", name)
	}
	if err != nil {
		return nil, errs.New(errs.Input, "%s: %v", name, err)
	}
	f, err := Decode(p, data)
	if err != nil {
		return nil, errs.New(errs.Input, "%s: %v", name, err)
	}
	for i := range f.Cases {
		f.Cases[i].File = name
	}
	return f, nil
}

// LoadAllDist reads the golden file of every (collective op, dtype) pair that has
// DistCatalogue specs, in catalogue order: the multi-rank cases (GoldenCase.World > 0).
func LoadAllDist(fsys fs.FS) ([]*File, error) {
	var out []*File
	for _, p := range filesOf(DistCatalogue()) {
		f, err := loadAt(fsys, DataRoot, p)
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
	return out, nil
}

// catalogueFiles lists the files the single-device catalogue produces, in catalogue order.
func catalogueFiles() []string { return filesOf(Catalogue()) }

// filesOf lists the files of specs, in their order.
func filesOf(specs []Spec) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range specs {
		if p := s.File(); !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// MapFS copies every file of fsys into memory, so a test can corrupt or replace golden files
// without touching the embedded data or the tree.
func MapFS(fsys fs.FS) (fstest.MapFS, error) {
	out := fstest.MapFS{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		out[p] = &fstest.MapFile{Data: data, Mode: 0o644}
		return nil
	})
	if err != nil {
		return nil, errs.New(errs.Input, "golden: copy data: %v", err)
	}
	return out, nil
}
