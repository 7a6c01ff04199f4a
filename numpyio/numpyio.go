// Package numpyio checks the engine's tensor files (engine/tensor: .npy and .npz) against
// NumPy itself, both ways: what the engine writes, NumPy must read with the same bits, dtype,
// shape and C order; what NumPy writes (np.save, np.savez, np.savez_compressed), the engine
// must read with the same bits, or refuse with a coded error where it does not take the file
// (big-endian data, Fortran order). The engine's own tests read and write by its own
// understanding of the format: a writer and a reader that agree on a wrong shape order or
// byte order pass them all, and only a third party catches it.
//
// The NumPy side is numpy_check.py, run under the interpreter Python names.
package numpyio

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

//go:embed numpy_check.py
var script []byte

// PythonEnv names the interpreter with NumPy; set, a missing NumPy is a failure, not a skip.
const PythonEnv = "TESSERA_QA_PYTHON"

// Python returns the interpreter to use and whether the user asked for it explicitly:
// $TESSERA_QA_PYTHON, else /usr/bin/python3 (the one CI installs numpy into; the python3
// first on PATH may be another).
func Python() (string, bool) {
	if p := os.Getenv(PythonEnv); p != "" {
		return p, true
	}
	return "/usr/bin/python3", false
}

// Available says why py cannot run the check (nil when it can).
func Available(py string) error {
	out, err := exec.Command(py, "-c", "import numpy").CombinedOutput()
	if err != nil {
		return errs.New(errs.Unsupported, "%s cannot import numpy: %v %s", py, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Entry is one array in a file: the file, its key in an .npz ("" for a .npy), what it must
// hold, and for a file the engine must refuse, the code.
type Entry struct {
	File   string   `json:"file"`
	Key    string   `json:"key,omitempty"`
	Descr  string   `json:"descr"`
	Shape  []int    `json:"shape"`
	Bits   []uint64 `json:"bits,omitempty"`
	Decode string   `json:"decode,omitempty"` // f16 or bf16: NumPy decodes the bits too
	Values []string `json:"values,omitempty"` // the engine's decoded values, for Decode
	Refuse string   `json:"refuse,omitempty"`
}

// Shapes are the ranks every dtype is written at: 0-d, 1-d, higher, and size-0 dims when the
// tensor package takes them (EmptyShapes).
var Shapes = [][]int{{}, {5}, {2, 3}, {2, 1, 3, 2}}

// EmptyShapes are included where the tensor package writes them.
var EmptyShapes = [][]int{{0}, {3, 0, 2}}

// shapes returns Shapes, plus EmptyShapes that tensor.WriteNPY accepts.
func shapes() [][]int {
	out := slices.Clone(Shapes)
	for _, s := range EmptyShapes {
		var sink strings.Builder
		if tensor.WriteNPY(&sink, tensor.New(numerics.F32, s)) == nil {
			out = append(out, s)
		}
	}
	return out
}

func shapeTag(s []int) string {
	if len(s) == 0 {
		return "scalar"
	}
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return strings.Join(parts, "x")
}

// Tensors returns the engine's side: every dtype at every shape, filled with random bit
// patterns (NaNs, infinities, subnormals and -0 among them: every pattern is a value).
func Tensors() (names []string, ts []*tensor.Tensor) {
	rng := rand.New(rand.NewPCG(21, 2026))
	for _, dt := range numerics.All {
		for _, s := range shapes() {
			t := tensor.New(dt, s)
			for i := range t.Len() {
				b := rng.Uint64()
				if dt == numerics.Bool {
					b &= 1
				}
				t.SetBits(i, b)
			}
			names, ts = append(names, dt.String()+"_"+shapeTag(s)), append(ts, t)
		}
	}
	return names, ts
}

// WriteEngine writes every tensor of Tensors into dir as NAME.npy and all of them into
// dir/all.npz, and returns the manifest of what NumPy must find.
func WriteEngine(dir string) ([]Entry, error) {
	names, ts := Tensors()
	var entries []Entry
	for i, t := range ts {
		e := entryOf(t)
		e.File = filepath.Join(dir, names[i]+".npy")
		f, err := os.Create(e.File)
		if err != nil {
			return nil, err
		}
		err = tensor.WriteNPY(f, t)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", e.File, err)
		}
		entries = append(entries, e)
	}
	npz := filepath.Join(dir, "all.npz")
	if err := tensor.WriteNPZFile(npz, names, ts); err != nil {
		return nil, err
	}
	for i, t := range ts {
		e := entryOf(t)
		e.File, e.Key = npz, names[i]
		entries = append(entries, e)
	}
	return entries, nil
}

// entryOf states what t's file must hold, from t itself: Bits reads the tensor's bytes as the
// engine defines them, not as the writer put them in the file.
func entryOf(t *tensor.Tensor) Entry {
	e := Entry{Descr: tensor.Descr(t.DType), Shape: slices.Clone(t.Shape), Bits: []uint64{}}
	if e.Shape == nil {
		e.Shape = []int{}
	}
	for i := range t.Len() {
		e.Bits = append(e.Bits, t.Bits(i))
	}
	if t.DType == numerics.F16 || t.DType == numerics.BF16 {
		e.Decode = t.DType.String()
		for i := range t.Len() {
			e.Values = append(e.Values, strconv.FormatFloat(t.Float64(i), 'g', -1, 64))
		}
	}
	return e
}

// run runs the NumPy side and returns its stdout.
func run(py, mode, arg string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "numpyio-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "numpy_check.py")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(py, path, mode, arg)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s numpy_check.py %s: %v: %s", py, mode, err, stderr.String())
	}
	return out, nil
}

// CheckInNumPy has NumPy read what the manifest lists and returns every disagreement.
func CheckInNumPy(py string, entries []Entry, dir string) ([]string, error) {
	manifest := filepath.Join(dir, "engine-manifest.json")
	data, err := json.Marshal(entries)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(manifest, data, 0o644); err != nil {
		return nil, err
	}
	out, err := run(py, "check", manifest)
	if err != nil {
		return nil, err
	}
	var problems []string
	if err := json.Unmarshal(out, &problems); err != nil {
		return nil, fmt.Errorf("numpy_check.py check printed %q: %v", out, err)
	}
	return problems, nil
}

// WriteNumPy has NumPy write its files into dir and returns their manifest.
func WriteNumPy(py, dir string) ([]Entry, error) {
	if _, err := run(py, "write", dir); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	var entries []Entry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("numpy manifest: %v", err)
	}
	return entries, nil
}

// dtypeOf is the engine dtype a NumPy descr is read as: 16-bit patterns as bf16, bytes as
// fp8 e4m3 (any dtype that takes the descr would do: the bits are compared).
var dtypeOf = map[string]numerics.DType{
	"<f8": numerics.F64, "<f4": numerics.F32, "<f2": numerics.F16, "<u2": numerics.BF16,
	"|u1": numerics.F8E4M3, "|i1": numerics.I8, "<i4": numerics.I32, "|b1": numerics.Bool,
	">f4": numerics.F32, ">i4": numerics.I32,
}

// ReadInEngine reads one NumPy-written entry with the engine and returns nil when it holds
// what the manifest says, or is refused with the code the manifest names.
func ReadInEngine(e Entry) error {
	where := e.File
	if e.Key != "" {
		where += "[" + e.Key + "]"
	}
	t, err := readEntry(e)
	if e.Refuse != "" {
		switch {
		case err == nil:
			return fmt.Errorf("%s: the engine read %s%v that it must refuse with %s", where, e.Descr, e.Shape, e.Refuse)
		case string(errs.CodeOf(err)) != e.Refuse || strings.Contains(err.Error(), "\n"):
			return fmt.Errorf("%s: refused with %q, want one %s line", where, err, e.Refuse)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	if !slices.Equal(t.Shape, e.Shape) {
		return fmt.Errorf("%s: shape %v, NumPy wrote %v", where, t.Shape, e.Shape)
	}
	if t.Len() != len(e.Bits) {
		return fmt.Errorf("%s: %d elements, NumPy wrote %d", where, t.Len(), len(e.Bits))
	}
	for i, b := range e.Bits {
		if got := t.Bits(i); got != b {
			return fmt.Errorf("%s: element %d has bits %#x, NumPy wrote %#x", where, i, got, b)
		}
	}
	return nil
}

func readEntry(e Entry) (*tensor.Tensor, error) {
	dt, ok := dtypeOf[e.Descr]
	if !ok {
		return nil, fmt.Errorf("no engine dtype reads %s", e.Descr)
	}
	if e.Key == "" {
		a, err := tensor.ReadNPYFile(e.File)
		if err != nil {
			return nil, err
		}
		return a.As(dt)
	}
	arrays, err := tensor.ReadNPZFile(e.File)
	if err != nil {
		return nil, err
	}
	for _, a := range arrays {
		if a.Name == e.Key {
			return a.As(dt)
		}
	}
	return nil, fmt.Errorf("no array %q in %s", e.Key, e.File)
}
