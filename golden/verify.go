package golden

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Problem is one thing wrong with the golden data: a file that is corrupted, of an unknown
// format, stale against the catalogue, missing or extra.
type Problem struct {
	File string // display path: "golden/data/matmul/bf16.golden"
	Kind string // format, checksum, corrupt, stale, missing, extra, read
	Msg  string
}

// Err is the problem as a coded one-line error.
func (p Problem) Err() *errs.Error { return errs.New(errs.Input, "%s: %s", p.File, p.Msg) }

func (p Problem) String() string { return p.Err().Error() }

const updateHint = "run `tessera-qa golden update`"

// Verify checks the golden data in fsys (Data(), or os.DirFS of a data directory) against this
// build: every file's format version and checksum, that it decodes, and that it is not stale
// (the same cases, graph texts, seeds, dists, inputs and tolerances as Catalogue() and
// DistCatalogue() produce now, from the same generator version; every rank's inputs for a
// multi-rank case); and that the file set is exactly the catalogues'.
// Problems name files under DataRoot; VerifyDir names them under the directory given. The
// error is for a data directory that cannot be listed at all.
func Verify(fsys fs.FS) ([]Problem, error) { return verifyAt(fsys, DataRoot) }

// VerifyDir verifies the data directory dir on disk (`tessera-qa golden verify --dir`).
func VerifyDir(dir string) ([]Problem, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, errs.New(errs.Input, "golden verify: %v", err)
	}
	if !st.IsDir() {
		return nil, errs.New(errs.Input, "golden verify: %s is not a directory", dir)
	}
	return verifyAt(os.DirFS(dir), dir)
}

func verifyAt(fsys fs.FS, root string) ([]Problem, error) {
	present, err := listGolden(fsys)
	if err != nil {
		return nil, errs.New(errs.Input, "golden verify: list %s: %v", root, err)
	}
	groups := groupByFile(allSpecs())
	var out []Problem
	add := func(p string, kind problemKind, format string, args ...any) {
		out = append(out, Problem{File: display(root, p), Kind: string(kind), Msg: fmt.Sprintf(format, args...)})
	}
	for _, p := range append(Pairs(), DistPairs()...) {
		if _, ok := groups.specs[p]; !ok {
			add(p, kindMissing, "the catalogue has no cases for this op and dtype (add them in golden/catalogue*.go)")
		}
	}
	for _, p := range groups.order {
		if !present[p] {
			add(p, kindMissing, "missing: the catalogue has %d cases for it; %s", len(groups.specs[p]), updateHint)
			continue
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			add(p, kindRead, "%v", err)
			continue
		}
		f, err := Decode(p, data)
		if err != nil {
			var de *decodeError
			kind := kindCorrupt
			if errors.As(err, &de) {
				kind = de.kind
			}
			add(p, kind, "%v", err)
			continue
		}
		if msg := staleness(f, groups.specs[p]); msg != "" {
			add(p, kindStale, "stale: %s; %s", msg, updateHint)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(present)) {
		if _, ok := groups.specs[p]; !ok {
			add(p, kindExtra, "not produced by the catalogue (op or dtype removed, or a stray file); %s to delete it", updateHint)
		}
	}
	return out, nil
}

// listGolden returns every *.golden path in fsys.
func listGolden(fsys fs.FS) (map[string]bool, error) {
	out := map[string]bool{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".golden") {
			out[p] = true
		}
		return nil
	})
	return out, err
}

// staleness describes the first difference between a decoded file and the specs the catalogue
// produces for it now, or returns "".
func staleness(f *File, specs []Spec) string {
	if f.Generator != GeneratorVersion {
		return fmt.Sprintf("written by generator %q, this build is %q", f.Generator, GeneratorVersion)
	}
	if f.Op != specs[0].Op || f.DType != specs[0].DType {
		return fmt.Sprintf("header says %s/%s", f.Op, f.DType)
	}
	names := func(n int, at func(int) string) string {
		s := make([]string, n)
		for i := range s {
			s[i] = at(i)
		}
		return strings.Join(s, ", ")
	}
	have := names(len(f.Cases), func(i int) string { return f.Cases[i].Name })
	want := names(len(specs), func(i int) string { return specs[i].Name })
	if have != want {
		return fmt.Sprintf("cases [%s], the catalogue has [%s]", have, want)
	}
	for i, s := range specs {
		if msg := caseStaleness(f.Cases[i], s); msg != "" {
			return "case " + s.Name + ": " + msg
		}
	}
	return ""
}

func caseStaleness(c GoldenCase, s Spec) string {
	switch {
	case c.Seed != s.Seed:
		return fmt.Sprintf("seed %d, the catalogue's is %d", c.Seed, s.Seed)
	case c.GraphText != graph.Print(s.Graph):
		return "graph text differs from the catalogue's"
	case !maps.Equal(c.Dists, s.Dists):
		return "input distributions differ from the catalogue's"
	case !slices.Equal(c.Tolerances, s.Tolerances):
		return fmt.Sprintf("tolerances %v, the catalogue's are %v", c.Tolerances, s.Tolerances)
	}
	if c.World != s.World() {
		return fmt.Sprintf("stored for %d ranks, the catalogue's case runs on %d", max(c.World, 1), max(s.World(), 1))
	}
	if s.World() > 0 {
		ins, err := s.RankInputs()
		if err != nil {
			return "the catalogue cannot draw its inputs: " + err.Error()
		}
		for r, in := range ins {
			for _, v := range s.Graph.Inputs {
				if !sameTensor(c.RankInputs[r][v.Name], in[v.Name]) {
					return fmt.Sprintf("rank %d's input %%%s differs from what the catalogue draws", r, v.Name)
				}
			}
		}
		return ""
	}
	in, err := s.Inputs()
	if err != nil {
		return "the catalogue cannot draw its inputs: " + err.Error()
	}
	for _, v := range s.Graph.Inputs {
		if !sameTensor(c.Inputs[v.Name], in[v.Name]) {
			return fmt.Sprintf("input %%%s differs from what the catalogue draws", v.Name)
		}
	}
	return ""
}

func sameTensor(a, b *tensor.Tensor) bool {
	return a != nil && b != nil && a.DType == b.DType && slices.Equal(a.Shape, b.Shape) && string(a.Data) == string(b.Data)
}
