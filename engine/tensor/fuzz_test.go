package tensor

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// checkReadErr holds every rejection to the error contract: coded, one line, input or dtype.
func checkReadErr(t *testing.T, err error) {
	if c := errs.CodeOf(err); c != errs.Input && c != errs.DType {
		t.Fatalf("error with code %s: %v", c, err)
	}
	if strings.ContainsAny(err.Error(), "\n\r") {
		t.Fatalf("error is not one line: %q", err)
	}
}

func sameArray(a, b *Array) bool {
	return a.Name == b.Name && a.Descr == b.Descr && slices.Equal(a.Shape, b.Shape) && bytes.Equal(a.Data, b.Data)
}

// checkArray re-writes a successfully read array, raw and through every dtype it can be read
// as, and requires the re-read to give it back unchanged.
func checkArray(t *testing.T, a *Array) {
	size, _, err := descrSize(a.Descr)
	if err != nil {
		t.Fatalf("read an array with descr %q: %v", a.Descr, err)
	}
	if n, err := checkShape(a.Shape, size); err != nil || n != len(a.Data) || a.Shape == nil {
		t.Fatalf("read %s%#v with %d data bytes (%v)", a.Descr, a.Shape, len(a.Data), err)
	}
	var buf bytes.Buffer
	if err := writeArray(&buf, a, "fuzz"); err != nil {
		t.Fatal(err)
	}
	b, err := ReadNPY(&buf)
	if err != nil {
		t.Fatalf("re-reading %s%v: %v", a.Descr, a.Shape, err)
	}
	b.Name = a.Name
	if !sameArray(a, b) {
		t.Fatalf("raw re-write changed the array: %+v -> %+v", a, b)
	}
	for _, dt := range numerics.All {
		tn, err := a.As(dt)
		if err != nil {
			checkReadErr(t, err)
			continue
		}
		buf.Reset()
		if err := WriteNPY(&buf, tn); err != nil {
			t.Fatalf("WriteNPY(%s): %v", tn.TypeString(), err)
		}
		c, err := ReadNPY(&buf)
		if err != nil {
			t.Fatalf("re-reading %s: %v", tn.TypeString(), err)
		}
		tc, err := c.As(dt)
		if err != nil {
			t.Fatalf("re-reading %s as %s: %v", c.Descr, dt, err)
		}
		if !slices.Equal(tc.Shape, tn.Shape) || !bytes.Equal(tc.Data, tn.Data) {
			t.Fatalf("%s changed through WriteNPY/ReadNPY", tn.TypeString())
		}
	}
}

func FuzzReadNPY(f *testing.F) {
	f.Add([]byte(numpyArange3))
	f.Add(rawNPY(2, "{'shape':(),'descr':'|b1','fortran_order':False}", []byte{1}))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ReadNPY(bytes.NewReader(data))
		if err != nil {
			checkReadErr(t, err)
			return
		}
		checkArray(t, a)
	})
}

func FuzzReadNPZ(f *testing.F) {
	for _, name := range []string{"numpy_savez.npz", "numpy_savez_compressed.npz"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		arrays, err := ReadNPZ(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			checkReadErr(t, err)
			return
		}
		for _, a := range arrays {
			checkArray(t, a)
		}
		var buf bytes.Buffer
		if err := writeNPZArrays(&buf, arrays); err != nil {
			t.Fatal(err)
		}
		again, err := ReadNPZ(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatalf("re-reading %d arrays: %v", len(arrays), err)
		}
		if len(again) != len(arrays) {
			t.Fatalf("re-read %d arrays, wrote %d", len(again), len(arrays))
		}
		for i := range again {
			if !sameArray(arrays[i], again[i]) {
				t.Fatalf("array %d changed: %+v -> %+v", i, arrays[i], again[i])
			}
		}
	})
}
