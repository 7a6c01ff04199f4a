package tensor

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// numpyArange3 is np.save(f, np.arange(3, dtype='<f4')) from a NumPy that adds the 21-digit
// growth-axis spare space: magic, version 1.0, header length 0x76, the dict, 20 spare spaces
// and 40 alignment spaces (10+118 = 128 = 2*64), '\n', then 0.0 1.0 2.0 as little-endian f32.
var numpyArange3 = "\x93NUMPY\x01\x00\x76\x00" +
	"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }" + strings.Repeat(" ", 60) + "\n" +
	"\x00\x00\x00\x00" + "\x00\x00\x80\x3f" + "\x00\x00\x00\x40"

// rawNPY builds a .npy with the dict exactly as given (no padding) in format major.0.
func rawNPY(major byte, dict string, data []byte) []byte {
	b := append([]byte(npyMagic), major, 0)
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(dict)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(dict)))
	}
	return append(append(b, dict...), data...)
}

func dict(descr, shape string) string {
	return fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)
}

func wantErr(t *testing.T, err error, code errs.Code, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s error containing %q, got nil", code, subs)
	}
	msg := err.Error()
	if errs.CodeOf(err) != code {
		t.Errorf("code %s, want %s: %s", errs.CodeOf(err), code, msg)
	}
	if strings.ContainsAny(msg, "\n\r") {
		t.Errorf("error is not one line: %q", msg)
	}
	for _, s := range subs {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not mention %q", msg, s)
		}
	}
}

func TestReadNPYNumPyBytes(t *testing.T) {
	a, err := ReadNPY(strings.NewReader(numpyArange3))
	if err != nil {
		t.Fatal(err)
	}
	if a.Descr != "<f4" || !slices.Equal(a.Shape, []int{3}) || a.Name != "" {
		t.Fatalf("got %+v", a)
	}
	for i, want := range []float32{0, 1, 2} {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*i:])); got != want {
			t.Errorf("element %d = %v, want %v", i, got, want)
		}
	}
}

func TestWriteNPYMatchesNumPy(t *testing.T) {
	tn := &Tensor{DType: numerics.F32, Shape: []int{3}, Data: []byte(numpyArange3[128:])}
	var buf bytes.Buffer
	if err := WriteNPY(&buf, tn); err != nil {
		t.Fatal(err)
	}
	if buf.String() != numpyArange3 {
		t.Fatalf("WriteNPY bytes differ from NumPy's:\n got %q\nwant %q", buf.String(), numpyArange3)
	}
}

func TestWriteNPYHeaderLayout(t *testing.T) {
	for _, c := range []struct {
		dt    numerics.DType
		shape []int
		want  string
	}{
		{numerics.F64, []int{}, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }"},
		{numerics.BF16, []int{2, 3}, "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }"},
		{numerics.F8E5M2, []int{0, 4, 1}, "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 4, 1), }"},
		{numerics.Bool, []int{5}, "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }"},
	} {
		var buf bytes.Buffer
		if err := WriteNPY(&buf, New(c.dt, c.shape)); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		hlen := int(binary.LittleEndian.Uint16(b[8:10]))
		if string(b[:8]) != npyMagic+"\x01\x00" || (10+hlen)%64 != 0 || b[10+hlen-1] != '\n' {
			t.Errorf("%v%v: bad prefix or alignment: %q", c.dt, c.shape, b[:10])
		}
		if h := strings.TrimRight(string(b[10:10+hlen]), " \n"); h != c.want {
			t.Errorf("%v%v: header %q, want %q", c.dt, c.shape, h, c.want)
		}
		if len(b)-10-hlen != NumElems(c.shape)*c.dt.Size() {
			t.Errorf("%v%v: %d data bytes", c.dt, c.shape, len(b)-10-hlen)
		}
	}
}

// Spellings a NumPy (or other) writer may produce, all meaning the same array.
func TestReadNPYHeaderSpellings(t *testing.T) {
	data := []byte{1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0}
	for _, c := range []struct {
		name string
		npy  []byte
	}{
		{"numpy order", rawNPY(1, dict("<u2", "(2, 3)")+"   \n", data)},
		{"shape first", rawNPY(1, "{'shape': (2, 3), 'fortran_order': False, 'descr': '<u2'}\n", data)},
		{"double quotes", rawNPY(1, `{"descr": "<u2", "fortran_order": False, "shape": (2,3)}`, data)},
		{"no spaces", rawNPY(1, "{'descr':'<u2','fortran_order':False,'shape':(2,3,),}", data)},
		{"newlines and tabs", rawNPY(1, "\n{\n\t'descr' : '<u2' ,\n\t'fortran_order' : False ,\n\t'shape' : ( 2 , 3 ) ,\n}\n\n", data)},
		{"unaligned", rawNPY(1, dict("<u2", "(2, 3)"), data)},
		{"version 2.0", rawNPY(2, dict("<u2", "(2, 3)")+"\n", data)},
		{"version 3.0", rawNPY(3, dict("<u2", "(2, 3)")+"\n", data)},
	} {
		a, err := ReadNPY(bytes.NewReader(c.npy))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if a.Descr != "<u2" || !slices.Equal(a.Shape, []int{2, 3}) || !bytes.Equal(a.Data, data) {
			t.Errorf("%s: got %+v", c.name, a)
		}
	}
}

func TestReadNPYShapes(t *testing.T) {
	for _, c := range []struct {
		shape string
		want  []int
	}{
		{"()", []int{}},
		{"( )", []int{}},
		{"(4,)", []int{4}},
		{"(0,)", []int{0}},
		{"(0, 7)", []int{0, 7}},
		{"(1, 1, 1, 2)", []int{1, 1, 1, 2}},
	} {
		n := max(NumElems(c.want), 0)
		a, err := ReadNPY(bytes.NewReader(rawNPY(1, dict("|u1", c.shape), make([]byte, n))))
		if err != nil {
			t.Errorf("shape %s: %v", c.shape, err)
			continue
		}
		if !slices.Equal(a.Shape, c.want) || a.Shape == nil || len(a.Data) != n {
			t.Errorf("shape %s: got %#v with %d bytes", c.shape, a.Shape, len(a.Data))
		}
	}
}

func TestReadNPYRejects(t *testing.T) {
	ok := dict("<f4", "(2,)")
	data := make([]byte, 8)
	v2Huge := append([]byte(npyMagic+"\x02\x00"), 0xff, 0xff, 0xff, 0x7f)
	for _, c := range []struct {
		name string
		npy  []byte
		code errs.Code
		subs []string
	}{
		{"empty", nil, errs.Input, []string{"npy: truncated"}},
		{"short magic", []byte("\x93NUM"), errs.Input, []string{"truncated"}},
		{"bad magic", append([]byte("PK\x03\x04\x14\x00\x00\x00"), data...), errs.Input, []string{"bad magic", "not a .npy"}},
		{"version 4.0", append([]byte(npyMagic+"\x04\x00"), 0, 0), errs.Input, []string{"version 4.0"}},
		{"version 1.1", append([]byte(npyMagic+"\x01\x01"), 0, 0), errs.Input, []string{"version 1.1"}},
		{"no length", []byte(npyMagic + "\x01\x00\x10"), errs.Input, []string{"header length"}},
		{"huge header length", v2Huge, errs.Input, []string{"header length 2147483647 exceeds"}},
		{"truncated header", rawNPY(1, ok, nil)[:30], errs.Input, []string{"header truncated: 20 of"}},
		{"not a dict", rawNPY(1, "('descr', '<f4')", data), errs.Input, []string{"byte 0", "want '{'"}},
		{"missing key", rawNPY(1, "{'descr': '<f4', 'shape': (2,)}", data), errs.Input, []string{"no key \"fortran_order\""}},
		{"unknown key", rawNPY(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", data), errs.Input, []string{"unknown key \"x\""}},
		{"duplicate key", rawNPY(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", data), errs.Input, []string{"duplicate key \"descr\"", "byte 17"}},
		{"unterminated", rawNPY(1, "{'descr", data), errs.Input, []string{"byte 1", "unterminated string"}},
		{"escape", rawNPY(1, `{'descr': '<f\4', 'fortran_order': False, 'shape': (2,)}`, data), errs.Input, []string{"escape"}},
		{"missing colon", rawNPY(1, "{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}", data), errs.Input, []string{"want ':' after key \"descr\""}},
		{"missing comma", rawNPY(1, "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", data), errs.Input, []string{"want ',' or '}'"}},
		{"garbage after", rawNPY(1, ok+" x", data), errs.Input, []string{"unexpected \"x\" after"}},
		{"fortran true", rawNPY(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}", data), errs.Input, []string{"fortran_order is True"}},
		{"fortran not bool", rawNPY(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", data), errs.Input, []string{"True or False"}},
		{"fortran Truex", rawNPY(1, "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}", data), errs.Input, []string{"True or False"}},
		{"int not tuple", rawNPY(1, dict("<f4", "(2)"), data), errs.Input, []string{"(2) is an int, not a tuple"}},
		{"list shape", rawNPY(1, dict("<f4", "[2]"), data), errs.Input, []string{"want a tuple"}},
		{"negative dim", rawNPY(1, dict("<f4", "(-2,)"), data), errs.Input, []string{"negative dim"}},
		{"huge dim", rawNPY(1, dict("<f4", "(99999999999999999999999,)"), data), errs.Input, []string{"dim exceeds"}},
		{"huge product", rawNPY(1, dict("<f4", "(1048576, 1048576)"), data), errs.Input, []string{"exceeds 1073741824 elements"}},
		{"huge bytes", rawNPY(1, dict("<f8", "(536870912,)"), data), errs.Input, []string{"exceeds 1073741824 bytes"}},
		{"too many dims", rawNPY(1, dict("<f4", "("+strings.Repeat("1, ", 65)+")"), data), errs.Input, []string{"more than 64 dims"}},
		{"leading zero", rawNPY(1, dict("<f4", "(02,)"), data), errs.Input, []string{"leading zero"}},
		{"float dim", rawNPY(1, dict("<f4", "(2.0,)"), data), errs.Input, []string{"want ',' or ')'"}},
		{"python2 long", rawNPY(1, dict("<f4", "(2L,)"), data), errs.Input, []string{"after a dim"}},
		{"big-endian", rawNPY(1, dict(">f4", "(2,)"), data), errs.DType, []string{"big-endian descr \">f4\""}},
		{"native order", rawNPY(1, dict("=f4", "(2,)"), data), errs.DType, []string{"byte order"}},
		{"pipe on f4", rawNPY(1, dict("|f4", "(2,)"), data), errs.DType, []string{"byte order"}},
		{"object", rawNPY(1, dict("|O", "(2,)"), data), errs.DType, []string{"unsupported descr \"|O\""}},
		{"unicode", rawNPY(1, dict("<U1", "(2,)"), data), errs.DType, []string{"unsupported descr \"<U1\""}},
		{"complex", rawNPY(1, dict("<c8", "(1,)"), data), errs.DType, []string{"unsupported descr"}},
		{"empty descr", rawNPY(1, dict("", "(2,)"), data), errs.DType, []string{"unsupported descr \"\""}},
		{"structured", rawNPY(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", data), errs.DType, []string{"structured"}},
		{"truncated data", rawNPY(1, ok, data[:5]), errs.Input, []string{"truncated: 5 of 8 bytes"}},
		{"trailing bytes", rawNPY(1, ok, append(data, 0)), errs.Input, []string{"trailing bytes after the 8 data bytes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := ReadNPY(bytes.NewReader(c.npy))
			if a != nil {
				t.Errorf("got an array along with the error")
			}
			wantErr(t, err, c.code, append(c.subs, "npy: ")...)
		})
	}
}

// A header may promise a gigabyte over a stream of a few bytes: the reader must find out
// without allocating the gigabyte.
func TestReadNPYHugeClaimAllocatesLittle(t *testing.T) {
	npy := rawNPY(1, dict("<f4", "(268435456,)"), make([]byte, 16))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadNPY(bytes.NewReader(npy))
	runtime.ReadMemStats(&after)
	wantErr(t, err, errs.Input, "truncated: 16 of 1073741824 bytes")
	if d := after.TotalAlloc - before.TotalAlloc; d > 8<<20 {
		t.Errorf("allocated %d bytes to find a 16-byte stream truncated", d)
	}
}

func TestAs(t *testing.T) {
	// every descr the reader sizes, in canonical form, with one element's bytes
	descrs := []string{"|b1", "|i1", "|u1", "<i2", "<u2", "<f2", "<i4", "<u4", "<f4", "<i8", "<u8", "<f8"}
	for _, dt := range numerics.All {
		for _, d := range descrs {
			size, _, _ := descrSize(d)
			a := &Array{Name: "w", Descr: d, Shape: []int{2, 1}, Data: make([]byte, 2*size)}
			a.Data[0] = 1
			tn, err := a.As(dt)
			if slices.Contains(accepts[dt], d) {
				if err != nil {
					t.Errorf("%s from %s: %v", dt, d, err)
					continue
				}
				if tn.DType != dt || !slices.Equal(tn.Shape, a.Shape) || &tn.Data[0] != &a.Data[0] {
					t.Errorf("%s from %s: got %+v", dt, d, tn)
				}
				continue
			}
			wantErr(t, err, errs.DType, `array "w"`, fmt.Sprintf("%q", d), dt.String())
		}
	}
	for _, c := range []struct {
		dt    numerics.DType
		descr string
	}{{numerics.F8E4M3, "<u1"}, {numerics.F8E5M2, "<u1"}, {numerics.I8, "<i1"}, {numerics.Bool, "<b1"}, {numerics.F16, "<f2"}} {
		if _, err := (&Array{Descr: c.descr, Shape: []int{1}, Data: make([]byte, c.dt.Size())}).As(c.dt); err != nil {
			t.Errorf("%s from %s: %v", c.dt, c.descr, err)
		}
	}
}

func TestAsRejects(t *testing.T) {
	_, err := (&Array{Name: "m", Descr: "|b1", Shape: []int{3}, Data: []byte{0, 1, 2}}).As(numerics.Bool)
	wantErr(t, err, errs.Input, `array "m"`, "bool element 2 is byte 0x02")
	_, err = (&Array{Name: "m", Descr: "<f2", Shape: []int{1}, Data: []byte{0, 0x3c}}).As(numerics.BF16)
	wantErr(t, err, errs.DType, `descr "<f2" cannot be read as bf16 (want <u2)`)
	_, err = (&Array{Name: "m", Descr: "<f4", Shape: []int{3}, Data: make([]byte, 8)}).As(numerics.F32)
	wantErr(t, err, errs.Input, "8 data bytes", "want 12")
	_, err = (&Array{Name: "m", Descr: ">f4", Shape: []int{2}, Data: make([]byte, 8)}).As(numerics.F32)
	wantErr(t, err, errs.DType, "big-endian", "wanted f32")
	_, err = (&Array{Name: "m", Descr: "<f4", Shape: []int{-1}}).As(numerics.F32)
	wantErr(t, err, errs.Input, "negative dim")
	_, err = (&Array{Name: "m", Descr: "<f4", Shape: []int{1}, Data: make([]byte, 4)}).As(numerics.Invalid)
	wantErr(t, err, errs.DType, "invalid dtype")
}

func TestDescr(t *testing.T) {
	want := map[numerics.DType]string{numerics.F64: "<f8", numerics.F32: "<f4", numerics.F16: "<u2",
		numerics.BF16: "<u2", numerics.F8E4M3: "|u1", numerics.F8E5M2: "|u1", numerics.I8: "|i1",
		numerics.I32: "<i4", numerics.Bool: "|b1", numerics.Invalid: "", numerics.DType(200): ""}
	for dt, d := range want {
		if got := Descr(dt); got != d {
			t.Errorf("Descr(%s) = %q, want %q", dt, got, d)
		}
		if size, _, err := descrSize(d); d != "" && (err != nil || size != dt.Size()) {
			t.Errorf("Descr(%s) = %q sizes to %d (%v), want %d", dt, d, size, err, dt.Size())
		}
	}
}

func TestWriteNPYRejects(t *testing.T) {
	var buf bytes.Buffer
	wantErr(t, WriteNPY(&buf, nil), errs.Input, "nil")
	wantErr(t, WriteNPY(&buf, &Tensor{DType: numerics.Invalid, Shape: []int{1}, Data: []byte{0}}), errs.DType, "cannot write dtype invalid")
	wantErr(t, WriteNPY(&buf, &Tensor{DType: numerics.F32, Shape: []int{2}, Data: make([]byte, 4)}), errs.Input, "4 data bytes for f32[2] (want 8)")
	wantErr(t, WriteNPY(&buf, &Tensor{DType: numerics.F32, Shape: []int{-2}}), errs.Input, "negative dim")
	if buf.Len() != 0 {
		t.Errorf("rejected tensors wrote %d bytes", buf.Len())
	}
}

func TestReadNPYFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "weights.npy")
	if err := os.WriteFile(good, []byte(numpyArange3), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := ReadNPYFile(good)
	if err != nil || a.Name != "weights" || !slices.Equal(a.Shape, []int{3}) {
		t.Fatalf("got %+v, %v", a, err)
	}
	bad := filepath.Join(dir, "bad.npy")
	if err := os.WriteFile(bad, []byte(numpyArange3+"x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadNPYFile(bad)
	wantErr(t, err, errs.Input, bad+": trailing bytes")
	_, err = ReadNPYFile(filepath.Join(dir, "missing.npy"))
	wantErr(t, err, errs.Input, "missing.npy")
}
