package golden

import (
	"bytes"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/atomicfile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/engine/version"
	"github.com/tessera-qa/tessera-qa/harness"
)

// UpdateSummary says what Update did.
type UpdateSummary struct {
	Files   int      // golden files the catalogue produces
	Cases   int      // cases in them
	Written []string // files created or rewritten because their bytes changed
	Removed []string // .golden files that the catalogue no longer produces, deleted
	Bytes   int64    // total size of the golden files after the update
}

// Update regenerates every golden file under dir (a data directory such as golden/data) from
// the catalogue and the golden model, and deletes .golden files the catalogue no longer
// produces. Files are written atomically and only when their bytes change; the bytes depend
// only on the catalogue, the golden model and the engine version, so running Update twice
// leaves identical files. A case that would not be a meaningful check (see Meaningful) stops
// the update before anything is written.
func Update(dir string) (UpdateSummary, error) {
	var sum UpdateSummary
	groups := groupByFile(allSpecs())
	encoded := make(map[string][]byte, len(groups.order))
	for _, p := range groups.order {
		f, err := Generate(groups.specs[p])
		if err != nil {
			return sum, err
		}
		data, err := Encode(f)
		if err != nil {
			return sum, err
		}
		encoded[p] = data
		sum.Cases += len(f.Cases)
	}
	sum.Files = len(groups.order)
	for _, p := range groups.order {
		full := filepath.Join(dir, filepath.FromSlash(p))
		old, err := os.ReadFile(full)
		if err == nil && bytes.Equal(old, encoded[p]) {
			sum.Bytes += int64(len(old))
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return sum, errs.New(errs.Input, "golden update: %v", err)
		}
		if err := writeAtomic(full, encoded[p]); err != nil {
			return sum, err
		}
		sum.Written = append(sum.Written, p)
		sum.Bytes += int64(len(encoded[p]))
	}
	removed, err := removeExtra(dir, encoded)
	sum.Removed = removed
	return sum, err
}

// specGroups is the catalogue split by golden file, files in catalogue order.
type specGroups struct {
	order []string
	specs map[string][]Spec
}

func groupByFile(specs []Spec) specGroups {
	g := specGroups{specs: map[string][]Spec{}}
	for _, s := range specs {
		p := s.File()
		if _, ok := g.specs[p]; !ok {
			g.order = append(g.order, p)
		}
		g.specs[p] = append(g.specs[p], s)
	}
	return g
}

// Generate builds the golden file of one (op, dtype) from its specs: inputs drawn from each
// spec's seed, outputs from the golden model.
func Generate(specs []Spec) (*File, error) {
	if len(specs) == 0 {
		return nil, errs.New(errs.Internal, "golden: no specs to generate")
	}
	f := &File{Path: specs[0].File(), Format: FormatVersion, Generator: GeneratorVersion, Engine: version.Version,
		Op: specs[0].Op, DType: specs[0].DType}
	for _, s := range specs {
		if s.File() != f.Path {
			return nil, errs.New(errs.Internal, "golden: spec %s belongs to %s, not %s", s.Name, s.File(), f.Path)
		}
		if s.World() > 0 {
			c, err := generateDist(s)
			if err != nil {
				return nil, err
			}
			c.File = display(DataRoot, f.Path)
			f.Cases = append(f.Cases, c)
			continue
		}
		in, err := s.Inputs()
		if err != nil {
			return nil, errs.Wrap(errs.Input, err, "golden: spec %s", s.Name)
		}
		want, err := ref.Run(s.Graph, in)
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "golden: spec %s: golden model", s.Name)
		}
		if err := Meaningful(s, want); err != nil {
			return nil, err
		}
		f.Cases = append(f.Cases, GoldenCase{File: display(DataRoot, f.Path), Name: s.Name, Op: s.Op, DType: s.DType, Seed: s.Seed,
			GraphText: graph.Print(s.Graph), Graph: s.Graph, Dists: s.Dists, Inputs: in, Want: want, Tolerances: s.Tolerances})
	}
	return f, nil
}

// allSpecs is every spec that has a golden file: the single-device catalogue, then the
// multi-rank one.
func allSpecs() []Spec { return append(Catalogue(), DistCatalogue()...) }

// generateDist draws every rank's inputs of a multi-rank spec and takes the expected outputs
// from ref.RunDist, each rank's required to be a meaningful check.
func generateDist(s Spec) (GoldenCase, error) {
	in, err := s.RankInputs()
	if err != nil {
		return GoldenCase{}, errs.Wrap(errs.Input, err, "golden: spec %s", s.Name)
	}
	want, err := ref.RunDist(s.Graph, in)
	if err != nil {
		return GoldenCase{}, errs.Wrap(errs.Internal, err, "golden: spec %s: golden model", s.Name)
	}
	for r, w := range want {
		if err := Meaningful(s, w); err != nil {
			return GoldenCase{}, errs.Wrap(errs.Internal, err, "rank %d", r)
		}
	}
	return GoldenCase{Name: s.Name, Op: s.Op, DType: s.DType, Seed: s.Seed, GraphText: graph.Print(s.Graph), Graph: s.Graph,
		Dists: s.Dists, Tolerances: s.Tolerances, World: s.World(), RankInputs: in, RankWant: want}, nil
}

// Meaningful reports whether the spec's tolerances make a real check of the reference outputs
// want: each reference must pass against itself (the magnitude guard accepts the tolerance),
// an all-zero output must fail, and an output of two or more elements must not be constant
// (a constant reference, like relu of negative data, tests nothing).
func Meaningful(s Spec, want []*tensor.Tensor) error {
	if len(want) != len(s.Tolerances) {
		return errs.New(errs.Internal, "golden: spec %s: %d outputs, %d tolerances", s.Name, len(want), len(s.Tolerances))
	}
	for i, w := range want {
		tol := s.Tolerances[i]
		if r := harness.Check(w, w, tol); !r.Pass {
			return errs.New(errs.Internal, "golden: spec %s output %d: reference fails against itself: %s", s.Name, i, r.Reason)
		}
		if s.Empty {
			if err := meaningfulEmpty(s, i, w, tol); err != nil {
				return err
			}
			continue
		}
		if r := harness.Check(tensor.New(w.DType, w.Shape), w, tol); r.Pass {
			return errs.New(errs.Internal, "golden: spec %s output %d: an all-zero output passes under %s", s.Name, i, tol)
		}
		if w.Len() >= 2 && constant(w) {
			return errs.New(errs.Internal, "golden: spec %s output %d: the reference is constant (%s)", s.Name, i, w.TypeString())
		}
	}
	return nil
}

// meaningfulEmpty is Meaningful for a case of catalogue_empty.go, whose reference is either
// empty (then the check is its shape: the same tensor one row taller must fail) or the value
// over nothing in every element, a constant by design (then every element must be that one
// value, and an output off by one, or 0 where the value is NaN or infinite, must fail).
func meaningfulEmpty(s Spec, i int, w *tensor.Tensor, tol harness.Tolerance) error {
	if w.Len() == 0 {
		taller := slices.Clone(w.Shape)
		taller[slices.Index(taller, 0)] = 1
		if r := harness.Check(tensor.New(w.DType, taller), w, tol); r.Pass {
			return errs.New(errs.Internal, "golden: spec %s output %d: %s passes for the empty %s", s.Name, i, tensor.TypeString(w.DType, taller), w.TypeString())
		}
		return nil
	}
	if !constant(w) {
		return errs.New(errs.Internal, "golden: spec %s output %d: an empty operand should give one value everywhere, the reference %s varies", s.Name, i, w.TypeString())
	}
	off := w.Clone()
	v := w.Float64(0)
	for j := range off.Len() {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			off.SetFloat64(j, 0)
		} else {
			off.SetFloat64(j, v+1)
		}
	}
	if r := harness.Check(off, w, tol); r.Pass {
		return errs.New(errs.Internal, "golden: spec %s output %d: an output of %g passes for the value over nothing %g under %s", s.Name, i, off.Float64(0), v, tol)
	}
	return nil
}

func constant(t *tensor.Tensor) bool {
	sz := t.DType.Size()
	for i := sz; i < len(t.Data); i += sz {
		if !bytes.Equal(t.Data[i:i+sz], t.Data[:sz]) {
			return false
		}
	}
	return true
}

// removeExtra deletes .golden files under dir that are not in keep, then any directory left
// empty by that; it returns the removed files as data-directory paths.
func removeExtra(dir string, keep map[string][]byte) ([]string, error) {
	var removed []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() || !strings.HasSuffix(rel, ".golden") {
			return nil
		}
		if _, ok := keep[rel]; ok {
			return nil
		}
		if err := os.Remove(p); err != nil {
			return err
		}
		removed = append(removed, rel)
		parent := filepath.Dir(p)
		if parent != filepath.Clean(dir) {
			if entries, err := os.ReadDir(parent); err == nil && len(entries) == 0 {
				os.Remove(parent)
			}
		}
		return nil
	})
	if err != nil {
		return removed, errs.New(errs.Input, "golden update: %v", err)
	}
	slices.Sort(removed)
	return removed, nil
}

// writeAtomic replaces path with data in one step (engine/atomicfile), so that a reader (a
// test embedding the directory, a concurrent verify) sees the old file or the new one.
func writeAtomic(path string, data []byte) error {
	if err := atomicfile.Write(path, data); err != nil {
		return errs.New(errs.Input, "golden update: write %s: %v", path, err)
	}
	return nil
}
