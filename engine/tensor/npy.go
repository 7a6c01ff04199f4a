package tensor

// We read .npy with our own strict parser instead of sbinet/npyio. npyio decodes through
// reflection into typed Go slices: it cannot hand back the raw bytes of a '<u2' array that
// only the graph knows to be bf16, and it cannot read '<f2' at all. The part of the format we
// accept (one dict literal with three keys, a dozen descrs) fits in a small hand parser that
// allocates nothing before every size is checked, which is what makes it fuzz-proof; and every
// rejection gets a coded message that names the array and the header byte.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Array is one raw array from a .npy/.npz: NumPy descr ('<f4', '<u2', '|b1', ...), shape, raw
// bytes (little-endian, C order). Name is the .npz key ("" for a bare .npy stream).
type Array struct {
	Name  string
	Descr string
	Shape []int
	Data  []byte
}

const (
	npyMagic = "\x93NUMPY"
	// maxNPYBytes caps one array's data, read or written; checked before allocating.
	maxNPYBytes = 1 << 30
	// maxHeaderLen is far above anything our three-key dict needs (NumPy itself refuses
	// headers over 10000 bytes by default) and keeps a hostile length field from allocating.
	maxHeaderLen = 1 << 16
	maxDims      = 64 // NumPy's own limit (NPY_MAXDIMS)
	headerAlign  = 64 // NumPy pads magic+length+header to this
)

// itemSizes lists the descr type codes we can size; anything else (objects, strings,
// structured, datetime, complex) is rejected before its data is read.
var itemSizes = map[string]int{
	"b1": 1, "i1": 1, "u1": 1,
	"i2": 2, "u2": 2, "f2": 2,
	"i4": 4, "u4": 4, "f4": 4,
	"i8": 8, "u8": 8, "f8": 8,
}

// accepts says which (canonical) descrs each dtype may be read from. 16- and 8-bit floats
// travel as unsigned bit patterns (design.md §6); '<f2' is IEEE half, so only f16 takes it.
var accepts = map[numerics.DType][]string{
	numerics.F64:    {"<f8"},
	numerics.F32:    {"<f4"},
	numerics.F16:    {"<u2", "<f2"},
	numerics.BF16:   {"<u2"},
	numerics.F8E4M3: {"|u1"},
	numerics.F8E5M2: {"|u1"},
	numerics.I8:     {"|i1"},
	numerics.I32:    {"<i4"},
	numerics.Bool:   {"|b1"},
}

// Descr is what WriteNPY writes for dt ('<u2' for f16 and bf16, '|u1' for fp8); "" for an
// invalid dtype.
func Descr(dt numerics.DType) string {
	if a := accepts[dt]; len(a) > 0 {
		return a[0]
	}
	return ""
}

// descrSize validates a descr and returns its element size and canonical spelling: NumPy
// writes '|' for one-byte types, other writers use '<', and both mean the same bytes.
func descrSize(d string) (int, string, error) {
	if len(d) < 2 {
		return 0, "", fmt.Errorf("unsupported descr %q", d)
	}
	size, ok := itemSizes[d[1:]]
	if !ok {
		return 0, "", fmt.Errorf("unsupported descr %q (want one of b1 i1 u1 i2 u2 f2 i4 u4 f4 i8 u8 f8)", d)
	}
	switch {
	case d[0] == '<' && size == 1:
		return size, "|" + d[1:], nil
	case d[0] == '<' || (d[0] == '|' && size == 1):
		return size, d, nil
	case d[0] == '>':
		return 0, "", fmt.Errorf("big-endian descr %q (save with arr.astype(arr.dtype.newbyteorder('<')))", d)
	}
	return 0, "", fmt.Errorf("descr %q has byte order %q (want '<', or '|' for one-byte types)", d, d[0])
}

// As interprets the array as dtype dt without copying: the tensor shares a.Data.
func (a *Array) As(dt numerics.DType) (*Tensor, error) {
	want, ok := accepts[dt]
	if !ok {
		return nil, errs.New(errs.DType, "array %q: cannot read as invalid dtype %s", a.Name, dt)
	}
	size, canon, err := descrSize(a.Descr)
	if err != nil {
		return nil, errs.New(errs.DType, "array %q: %v, wanted %s", a.Name, err, dt)
	}
	if !slices.Contains(want, canon) {
		return nil, errs.New(errs.DType, "array %q: descr %q cannot be read as %s (want %s)",
			a.Name, a.Descr, dt, strings.Join(want, " or "))
	}
	n, err := checkShape(a.Shape, size)
	if err != nil {
		return nil, errs.New(errs.Input, "array %q: %v", a.Name, err)
	}
	if len(a.Data) != n {
		return nil, errs.New(errs.Input, "array %q: %d data bytes for %s%v (want %d)", a.Name, len(a.Data), a.Descr, a.Shape, n)
	}
	if dt == numerics.Bool {
		for i, b := range a.Data {
			if b > 1 {
				return nil, errs.New(errs.Input, "array %q: bool element %d is byte 0x%02x (want 0 or 1)", a.Name, i, b)
			}
		}
	}
	return &Tensor{DType: dt, Shape: append([]int{}, a.Shape...), Data: a.Data}, nil
}

// checkShape returns the data size in bytes. Zero dims are allowed (the graph rejects them
// later); the product of the non-zero dims is capped too, so that nobody downstream computing
// strides of a zero-size array overflows.
func checkShape(shape []int, itemSize int) (int, error) {
	if len(shape) > maxDims {
		return 0, fmt.Errorf("%d dims (limit %d)", len(shape), maxDims)
	}
	elems, nonzero := 1, 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dim in shape %v", shape)
		}
		if d > maxNPYBytes || nonzero*max(d, 1) > maxNPYBytes {
			return 0, fmt.Errorf("shape %v exceeds %d elements", shape, maxNPYBytes)
		}
		nonzero *= max(d, 1)
		elems *= d
	}
	if elems*itemSize > maxNPYBytes {
		return 0, fmt.Errorf("shape %v of %d-byte elements exceeds %d bytes", shape, itemSize, maxNPYBytes)
	}
	return elems * itemSize, nil
}

// ReadNPY reads one .npy stream, which must end right after the array's data.
func ReadNPY(r io.Reader) (*Array, error) { return readNPY(r, "npy") }

// ReadNPYFile reads a .npy file; the array is named after the file (without ".npy") and
// errors name the path.
func ReadNPYFile(path string) (*Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "read npy")
	}
	defer f.Close()
	a, err := readNPY(f, path)
	if err != nil {
		return nil, err
	}
	a.Name = strings.TrimSuffix(filepath.Base(path), ".npy")
	return a, nil
}

func inputErr(what, format string, args ...any) error {
	return errs.New(errs.Input, "%s: %s", what, fmt.Sprintf(format, args...))
}

// readNPY reads magic, version, header and exactly the data the header promises; what names
// the source in errors.
func readNPY(r io.Reader, what string) (*Array, error) {
	var pre [12]byte
	if n, err := io.ReadFull(r, pre[:8]); err != nil {
		return nil, inputErr(what, "truncated: %d bytes, too short for the .npy magic and version", n)
	}
	if string(pre[:6]) != npyMagic {
		return nil, inputErr(what, "bad magic %q (want %q): not a .npy file", pre[:6], npyMagic)
	}
	lenBytes := 4
	switch {
	case pre[7] != 0 || pre[6] < 1 || pre[6] > 3:
		return nil, inputErr(what, "unsupported .npy format version %d.%d (want 1.0, 2.0 or 3.0)", pre[6], pre[7])
	case pre[6] == 1:
		lenBytes = 2
	}
	if _, err := io.ReadFull(r, pre[8:8+lenBytes]); err != nil {
		return nil, inputErr(what, "truncated in the header length field")
	}
	hlen := uint64(binary.LittleEndian.Uint32(pre[8:12]))
	if hlen > maxHeaderLen {
		return nil, inputErr(what, "header length %d exceeds %d bytes", hlen, maxHeaderLen)
	}
	hdr := make([]byte, hlen)
	if n, err := io.ReadFull(r, hdr); err != nil {
		return nil, inputErr(what, "header truncated: %d of %d bytes", n, hlen)
	}
	h, err := parseHeader(string(hdr))
	if err != nil {
		var e *errs.Error
		if errors.As(err, &e) {
			return nil, errs.New(e.Code, "%s: %s", what, e.Msg)
		}
		return nil, inputErr(what, "%v", err)
	}
	size, _, err := descrSize(h.descr)
	if err != nil {
		return nil, errs.New(errs.DType, "%s: %v", what, err)
	}
	n, err := checkShape(h.shape, size)
	if err != nil {
		return nil, inputErr(what, "%v", err)
	}
	data, got, err := readN(r, n)
	if err != nil {
		return nil, inputErr(what, "data of %s%v truncated: %d of %d bytes (%v)", h.descr, h.shape, got, n, err)
	}
	var one [1]byte
	switch k, err := io.ReadFull(r, one[:]); {
	case k > 0:
		return nil, inputErr(what, "trailing bytes after the %d data bytes of %s%v", n, h.descr, h.shape)
	case err != io.EOF:
		return nil, inputErr(what, "after the data: %v", err)
	}
	data = failpoint.Apply(failpoint.TensorNPYU2BigEndian, data, swapU2(h.descr))
	return &Array{Descr: h.descr, Shape: failpoint.Apply(failpoint.TensorNPYShapeReversed, h.shape, reversedDims), Data: data}, nil
}

// readN reads exactly n bytes, growing the buffer as data arrives so that a header promising
// a gigabyte over a ten-byte stream costs ten bytes, not a gigabyte.
func readN(r io.Reader, n int) ([]byte, int, error) {
	const chunk = 1 << 20
	buf := make([]byte, min(n, chunk))
	got := 0
	for {
		k, err := io.ReadFull(r, buf[got:])
		got += k
		if err != nil {
			return nil, got, err
		}
		if got == n {
			return buf, got, nil
		}
		grow := min(n, 2*len(buf)) - len(buf)
		buf = slices.Grow(buf, grow)[:len(buf)+grow]
	}
}

type npyHeader struct {
	descr   string
	fortran bool
	shape   []int
}

// hdrParser reads the header dict: a Python literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } followed by spaces and '\n'.
// It accepts what Python's literal_eval would for these three keys in any order, minus
// string escapes and the Python 2 '3L' ints, which no modern writer produces.
type hdrParser struct {
	s string
	i int
}

func (p *hdrParser) fail(format string, args ...any) error {
	return errs.New(errs.Input, "header byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *hdrParser) ws() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *hdrParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *hdrParser) next() string {
	if p.i >= len(p.s) {
		return "end of header"
	}
	return strconv.Quote(p.s[p.i : p.i+1])
}

func parseHeader(s string) (npyHeader, error) {
	p := &hdrParser{s: s}
	h := npyHeader{}
	seen := map[string]bool{}
	p.ws()
	if !p.eat('{') {
		return h, p.fail("want '{' to open the header dict, got %s", p.next())
	}
	for {
		p.ws()
		if p.eat('}') {
			break
		}
		keyAt := p.i
		key, err := p.str()
		if err != nil {
			return h, err
		}
		if seen[key] {
			p.i = keyAt
			return h, p.fail("duplicate key %q", key)
		}
		seen[key] = true
		p.ws()
		if !p.eat(':') {
			return h, p.fail("want ':' after key %q, got %s", key, p.next())
		}
		p.ws()
		switch key {
		case "descr":
			if p.i < len(p.s) && p.s[p.i] == '[' {
				return h, errs.New(errs.DType, "header byte %d: structured dtypes are not supported", p.i)
			}
			h.descr, err = p.str()
		case "fortran_order":
			h.fortran, err = p.boolean()
		case "shape":
			h.shape, err = p.tuple()
		default:
			p.i = keyAt
			return h, p.fail("unknown key %q (want 'descr', 'fortran_order', 'shape')", key)
		}
		if err != nil {
			return h, err
		}
		p.ws()
		if !p.eat(',') {
			if p.eat('}') {
				break
			}
			return h, p.fail("want ',' or '}' after the value of %q, got %s", key, p.next())
		}
	}
	p.ws()
	if p.i != len(p.s) {
		return h, p.fail("unexpected %s after the header dict", p.next())
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return h, p.fail("header dict has no key %q", k)
		}
	}
	if h.fortran && !failpoint.Enabled(failpoint.TensorNPYFortranAccepted) {
		return h, errs.New(errs.Input, "fortran_order is True: save a C-ordered array (np.ascontiguousarray)")
	}
	return h, nil
}

// str reads a quoted string without escapes.
func (p *hdrParser) str() (string, error) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", p.fail("want a quoted string, got %s", p.next())
	}
	q := p.s[p.i]
	start := p.i + 1
	for j := start; j < len(p.s); j++ {
		switch p.s[j] {
		case q:
			p.i = j + 1
			return p.s[start:j], nil
		case '\\', '\n', '\r':
			p.i = j
			return "", p.fail("escape or line break inside a string")
		}
	}
	return "", p.fail("unterminated string")
}

func (p *hdrParser) boolean() (bool, error) {
	for _, w := range []string{"True", "False"} {
		if strings.HasPrefix(p.s[p.i:], w) && !isIdent(p.s, p.i+len(w)) {
			p.i += len(w)
			return w == "True", nil
		}
	}
	return false, p.fail("want True or False for fortran_order, got %s", p.next())
}

func isIdent(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// tuple reads "()", "(3,)", "(2, 3)" or "(2, 3,)". "(3)" is an int in Python, not a tuple.
func (p *hdrParser) tuple() ([]int, error) {
	if !p.eat('(') {
		return nil, p.fail("want a tuple for shape, got %s", p.next())
	}
	dims := []int{}
	p.ws()
	if p.eat(')') {
		return dims, nil
	}
	for {
		d, err := p.dim()
		if err != nil {
			return nil, err
		}
		if dims = append(dims, d); len(dims) > maxDims {
			return nil, p.fail("shape has more than %d dims", maxDims)
		}
		p.ws()
		switch {
		case p.eat(','):
			p.ws()
			if p.eat(')') {
				return dims, nil
			}
		case p.eat(')'):
			if len(dims) == 1 {
				return nil, p.fail("shape (%d) is an int, not a tuple; write (%d,)", d, d)
			}
			return dims, nil
		default:
			return nil, p.fail("want ',' or ')' in shape, got %s", p.next())
		}
	}
}

// dim reads a non-negative decimal int no larger than maxNPYBytes.
func (p *hdrParser) dim() (int, error) {
	if p.eat('-') {
		return 0, p.fail("negative dim in shape")
	}
	start := p.i
	v := 0
	for p.i < len(p.s) && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
		v = 10*v + int(p.s[p.i]-'0')
		if v > maxNPYBytes {
			return 0, p.fail("dim exceeds %d", maxNPYBytes)
		}
		p.i++
	}
	switch {
	case p.i == start:
		return 0, p.fail("want a dim (decimal int) in shape, got %s", p.next())
	case p.s[start] == '0' && p.i-start > 1:
		p.i = start
		return 0, p.fail("dim with a leading zero")
	case isIdent(p.s, p.i):
		return 0, p.fail("want ',' or ')' after a dim, got %s", p.next())
	}
	return v, nil
}

// WriteNPY writes t as a .npy (format 1.0, C order, descr Descr(t.DType)).
func WriteNPY(w io.Writer, t *Tensor) error {
	a, err := arrayOf("npy", t)
	if err != nil {
		return err
	}
	return writeArray(w, a, "npy")
}

// arrayOf checks that t is well formed and views it as an Array named name.
func arrayOf(name string, t *Tensor) (*Array, error) {
	if t == nil {
		return nil, errs.New(errs.Input, "tensor %q is nil", name)
	}
	d := Descr(t.DType)
	if d == "" {
		return nil, errs.New(errs.DType, "tensor %q: cannot write dtype %s", name, t.DType)
	}
	n, err := checkShape(t.Shape, t.DType.Size())
	if err != nil {
		return nil, errs.New(errs.Input, "tensor %q: %v", name, err)
	}
	if len(t.Data) != n {
		return nil, errs.New(errs.Input, "tensor %q: %d data bytes for %s (want %d)", name, len(t.Data), t.TypeString(), n)
	}
	return &Array{Name: name, Descr: d, Shape: t.Shape, Data: failpoint.Apply(failpoint.TensorNPYU2BigEndian, t.Data, swapU2(d))}, nil
}

func writeArray(w io.Writer, a *Array, what string) error {
	if _, err := w.Write(npyHeaderBytes(a.Descr, a.Shape)); err != nil {
		return errs.Wrap(errs.Input, err, "write %s", what)
	}
	if _, err := w.Write(a.Data); err != nil {
		return errs.Wrap(errs.Input, err, "write %s", what)
	}
	return nil
}

// npyHeaderBytes renders magic, version, length and the dict the way NumPy does (keys sorted,
// Python reprs, padded with spaces and '\n' to a multiple of 64), minus the spare growth
// spaces recent NumPy adds for in-place appends.
func npyHeaderBytes(descr string, shape []int) []byte {
	var b strings.Builder
	b.WriteString("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (")
	for i, d := range failpoint.Apply(failpoint.TensorNPYShapeReversed, shape, reversedDims) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(d))
	}
	if len(shape) == 1 {
		b.WriteByte(',')
	}
	b.WriteString("), }")
	dict := b.String()
	prefix, major := 10, byte(1)
	total := roundUp(prefix+len(dict)+1, headerAlign)
	if total-prefix > 0xffff {
		prefix, major = 12, 2
		total = roundUp(prefix+len(dict)+1, headerAlign)
	}
	out := make([]byte, total)
	copy(out, npyMagic)
	out[6] = major
	if major == 1 {
		binary.LittleEndian.PutUint16(out[8:], uint16(total-prefix))
	} else {
		binary.LittleEndian.PutUint32(out[8:], uint32(total-prefix))
	}
	n := copy(out[prefix:], dict)
	for i := prefix + n; i < total-1; i++ {
		out[i] = ' '
	}
	out[total-1] = '\n'
	return out
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// Planted faults only (engine/failpoint): a writer and reader that agree with each other.

// reversedDims is a shape in column-major order, as a port from Fortran would write it.
func reversedDims(s []int) []int {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// swapU2 returns a function that byte-swaps the 16-bit elements of '<u2' data (a copy).
func swapU2(descr string) func([]byte) []byte {
	return func(b []byte) []byte {
		out := slices.Clone(b)
		if descr == "<u2" {
			for i := 0; i+1 < len(out); i += 2 {
				out[i], out[i+1] = out[i+1], out[i]
			}
		}
		return out
	}
}
