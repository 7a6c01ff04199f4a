package tensor

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// randomTensor fills a tensor with random bit patterns (NaN payloads, -0 and all), bools 0/1.
func randomTensor(rng *rand.Rand, dt numerics.DType, shape []int) *Tensor {
	t := New(dt, shape)
	for i := range t.Data {
		t.Data[i] = byte(rng.Uint32())
		if dt == numerics.Bool {
			t.Data[i] &= 1
		}
	}
	return t
}

func readBack(t *testing.T, b []byte) []*Array {
	t.Helper()
	arrays, err := ReadNPZ(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return arrays
}

func TestNPZRoundTripEveryDType(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := [][]int{{}, {7}, {3, 5}, {2, 0, 4}, {2, 3, 1, 4}}
	var names []string
	var ts []*Tensor
	for _, dt := range numerics.All {
		for _, shape := range shapes {
			names = append(names, TypeString(dt, shape))
			ts = append(ts, randomTensor(rng, dt, shape))
		}
	}
	// reversed so that archive order is visibly the caller's order, not sorted
	slices.Reverse(names)
	slices.Reverse(ts)
	var buf bytes.Buffer
	if err := WriteNPZ(&buf, names, ts); err != nil {
		t.Fatal(err)
	}
	arrays := readBack(t, buf.Bytes())
	if len(arrays) != len(ts) {
		t.Fatalf("read %d arrays, wrote %d", len(arrays), len(ts))
	}
	for i, a := range arrays {
		want := ts[i]
		if a.Name != names[i] || a.Descr != Descr(want.DType) {
			t.Errorf("array %d: name %q descr %q, want %q %q", i, a.Name, a.Descr, names[i], Descr(want.DType))
			continue
		}
		got, err := a.As(want.DType)
		if err != nil {
			t.Errorf("%s: %v", a.Name, err)
			continue
		}
		if got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("%s: round trip changed the tensor: %s, %d bytes", a.Name, got.TypeString(), len(got.Data))
		}
	}
}

func TestWriteNPZDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"b", "a", "größe"}
	ts := []*Tensor{randomTensor(rng, numerics.BF16, []int{4, 4}), randomTensor(rng, numerics.I32, []int{3}), randomTensor(rng, numerics.F8E4M3, []int{})}
	var b1, b2 bytes.Buffer
	if err := WriteNPZ(&b1, names, ts); err != nil {
		t.Fatal(err)
	}
	if err := WriteNPZ(&b2, names, ts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Fatal("the same tensors gave different archive bytes")
	}
	zr, err := zip.NewReader(bytes.NewReader(b1.Bytes()), int64(b1.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range zr.File {
		if f.Name != names[i]+".npy" || f.Method != zip.Store || f.ModifiedDate != dosEpochDate ||
			f.ModifiedTime != 0 || len(f.Extra) != 0 || f.Flags&0x8 != 0 {
			t.Errorf("entry %d: %q method %d date %#x time %#x extra %d flags %#x", i, f.Name, f.Method,
				f.ModifiedDate, f.ModifiedTime, len(f.Extra), f.Flags)
		}
		if utf8Flag := f.Flags&zipFlagUTF8 != 0; utf8Flag != (names[i] == "größe") {
			t.Errorf("entry %q: UTF-8 flag %v", f.Name, utf8Flag)
		}
	}
}

func TestNPZEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteNPZ(&buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	if arrays := readBack(t, buf.Bytes()); len(arrays) != 0 {
		t.Fatalf("empty archive gave %d arrays", len(arrays))
	}
}

// The fixtures come from testdata/numpy_fixtures.py, which writes them the way np.savez and
// np.savez_compressed do, through Python's zipfile with force_zip64.
func TestReadNPZNumPyFixtures(t *testing.T) {
	f32 := func(vs ...float32) (b []byte) {
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}
	want := []Array{
		{"x", "<f4", []int{2, 3}, f32(0, 1, 2, 3, 4, 5)},
		{"bits", "<u2", []int{4}, []byte{0x80, 0x3f, 0x80, 0xbf, 0xc0, 0x7f, 0, 0}},
		{"fp8", "|u1", []int{2, 2}, []byte{0x38, 0xb8, 0x7f, 0x00}},
		{"flags", "|b1", []int{3}, []byte{1, 0, 1}},
		{"scalar", "<f8", []int{}, binary.LittleEndian.AppendUint64(nil, math.Float64bits(2.5))},
		{"i", "<i4", []int{2}, []byte{0xff, 0xff, 0xff, 0xff, 7, 0, 0, 0}},
		{"h", "<f2", []int{1}, []byte{0x00, 0x3c}},
		{"empty", "<f4", []int{0, 3}, []byte{}},
	}
	for _, file := range []string{"numpy_savez.npz", "numpy_savez_compressed.npz"} {
		arrays, err := ReadNPZFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if len(arrays) != len(want) {
			t.Fatalf("%s: %d arrays, want %d", file, len(arrays), len(want))
		}
		for i, a := range arrays {
			w := want[i]
			if a.Name != w.Name || a.Descr != w.Descr || !slices.Equal(a.Shape, w.Shape) || !bytes.Equal(a.Data, w.Data) {
				t.Errorf("%s: array %d = %+v, want %+v", file, i, *a, w)
			}
		}
		for _, c := range []struct {
			i  int
			dt numerics.DType
		}{{0, numerics.F32}, {1, numerics.BF16}, {1, numerics.F16}, {2, numerics.F8E4M3}, {3, numerics.Bool},
			{4, numerics.F64}, {5, numerics.I32}, {6, numerics.F16}, {7, numerics.F32}} {
			if _, err := arrays[c.i].As(c.dt); err != nil {
				t.Errorf("%s: %v", file, err)
			}
		}
	}
}

type zipEntry struct {
	name   string
	data   []byte
	method uint16
}

func makeZip(t *testing.T, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: e.method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadNPZRejects(t *testing.T) {
	good := []byte(numpyArange3)
	bomb := append(append([]byte{}, good...), make([]byte, 16<<20)...)
	var flipped bytes.Buffer
	if err := WriteNPZ(&flipped, []string{"w"}, []*Tensor{{DType: numerics.I8, Shape: []int{64}, Data: bytes.Repeat([]byte{0x11}, 64)}}); err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Replace(flipped.Bytes(), bytes.Repeat([]byte{0x11}, 64), append(bytes.Repeat([]byte{0x11}, 63), 0x12), 1)
	var liar bytes.Buffer
	zw := zip.NewWriter(&liar)
	if w, err := zw.CreateRaw(&zip.FileHeader{Name: "big.npy", Method: zip.Store, UncompressedSize64: 3 << 30, CompressedSize64: uint64(len(good))}); err != nil {
		t.Fatal(err)
	} else if _, err := w.Write(good); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	var liars bytes.Buffer
	zw = zip.NewWriter(&liars)
	for _, name := range []string{"a.npy", "b.npy", "c.npy", "d.npy", "e.npy"} {
		if w, err := zw.CreateRaw(&zip.FileHeader{Name: name, Method: zip.Store, UncompressedSize64: 1 << 30, CompressedSize64: uint64(len(good))}); err != nil {
			t.Fatal(err)
		} else if _, err := w.Write(good); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	whole := makeZip(t, zipEntry{"a.npy", good, zip.Store})
	for _, c := range []struct {
		name string
		npz  []byte
		code errs.Code
		subs []string
	}{
		{"not a zip", good, errs.Input, []string{"not a readable zip archive"}},
		{"truncated archive", whole[:len(whole)-10], errs.Input, []string{"not a readable zip archive"}},
		{"not npy", makeZip(t, zipEntry{"a.npy", good, zip.Store}, zipEntry{"notes.txt", []byte("hi"), zip.Store}), errs.Input, []string{`entry "notes.txt"`, "not a NAME.npy"}},
		{"directory", makeZip(t, zipEntry{"dir/", nil, zip.Store}), errs.Input, []string{`entry "dir/"`, "not a NAME.npy"}},
		{"empty name", makeZip(t, zipEntry{".npy", good, zip.Store}), errs.Input, []string{"not a NAME.npy"}},
		{"duplicate", makeZip(t, zipEntry{"a.npy", good, zip.Store}, zipEntry{"a.npy", good, zip.Deflate}), errs.Input, []string{`duplicate array name "a"`}},
		{"bad npy", makeZip(t, zipEntry{"a.npy", good, zip.Store}, zipEntry{"b.npy", good[:100], zip.Deflate}), errs.Input, []string{`npz entry "b.npy"`, "header truncated"}},
		{"bad descr", makeZip(t, zipEntry{"o.npy", rawNPY(1, dict("|O", "(1,)"), make([]byte, 8)), zip.Store}), errs.DType, []string{`npz entry "o.npy"`, `"|O"`}},
		{"checksum", corrupt, errs.Input, []string{`npz entry "w.npy"`, "checksum"}},
		{"deflate bomb", makeZip(t, zipEntry{"a.npy", bomb, zip.Deflate}), errs.Input, []string{`npz entry "a.npy"`, "trailing bytes"}},
		{"declared total", liars.Bytes(), errs.Input, []string{`npz entry "e.npy"`, "brings the archive to 5368709120 declared"}},
		{"declared bomb", liar.Bytes(), errs.Input, []string{`npz entry "big.npy"`, "declares 3221225472 uncompressed bytes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			arrays, err := ReadNPZ(bytes.NewReader(c.npz), int64(len(c.npz)))
			if arrays != nil {
				t.Errorf("got arrays along with the error")
			}
			wantErr(t, err, c.code, c.subs...)
		})
	}
}

func TestWriteNPZRejects(t *testing.T) {
	ok := New(numerics.F32, []int{2})
	for _, c := range []struct {
		name  string
		names []string
		ts    []*Tensor
		code  errs.Code
		sub   string
	}{
		{"count", []string{"a", "b"}, []*Tensor{ok}, errs.Input, "2 names for 1 tensors"},
		{"empty name", []string{""}, []*Tensor{ok}, errs.Input, `name "" at position 0`},
		{"duplicate", []string{"a", "a"}, []*Tensor{ok, ok}, errs.Input, `name "a" at position 1`},
		{"nil", []string{"a", "n"}, []*Tensor{ok, nil}, errs.Input, `tensor "n" is nil`},
		{"short data", []string{"s"}, []*Tensor{{DType: numerics.I32, Shape: []int{3}, Data: make([]byte, 4)}}, errs.Input, `tensor "s": 4 data bytes`},
		{"dtype", []string{"d"}, []*Tensor{{DType: numerics.DType(99), Shape: []int{}, Data: []byte{0}}}, errs.DType, `tensor "d": cannot write dtype`},
	} {
		var buf bytes.Buffer
		wantErr(t, WriteNPZ(&buf, c.names, c.ts), c.code, c.sub)
		if buf.Len() != 0 {
			t.Errorf("%s: wrote %d bytes before failing", c.name, buf.Len())
		}
	}
}

func TestNPZFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.npz")
	rng := rand.New(rand.NewPCG(5, 6))
	first := randomTensor(rng, numerics.F16, []int{8})
	if err := WriteNPZFile(path, []string{"y"}, []*Tensor{first}); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v", st.Mode(), err)
	}
	// the second tensor is malformed: the write fails midway and must leave the file alone
	bad := &Tensor{DType: numerics.F32, Shape: []int{4}, Data: make([]byte, 3)}
	err = WriteNPZFile(path, []string{"y", "z"}, []*Tensor{first, bad})
	wantErr(t, err, errs.Input, path, `tensor "z"`)
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Error("a failed WriteNPZFile changed the existing file")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temp files left behind: %v", entries)
	}
	arrays, err := ReadNPZFile(path)
	if err != nil || len(arrays) != 1 || arrays[0].Name != "y" || !bytes.Equal(arrays[0].Data, first.Data) {
		t.Fatalf("read back %v, %v", arrays, err)
	}
	wantErr(t, WriteNPZFile(filepath.Join(dir, "no", "such", "dir.npz"), nil, nil), errs.Input, "dir.npz")
	junk := filepath.Join(dir, "junk.npz")
	if err := os.WriteFile(junk, makeZip(t, zipEntry{"q.npy", []byte("nope"), zip.Store}), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadNPZFile(junk)
	wantErr(t, err, errs.Input, junk+": npz entry \"q.npy\"")
	_, err = ReadNPZFile(filepath.Join(dir, "missing.npz"))
	wantErr(t, err, errs.Input, "missing.npz")
}
