package rounding

import (
	"fmt"
	"math"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Case is one encoding route with its inputs and the independent encoder's answer: a graph
// whose single output must equal Want bit for bit, or (Graph nil) numerics.Encode itself.
type Case struct {
	Name   string // route/src->dst, e.g. cast/f64->fp8e4m3
	Graph  *graph.Graph
	Inputs map[string]*tensor.Tensor
	// Values are the float64 inputs of the Encode route (Graph nil).
	Values []float64
	Out    numerics.DType
	Want   []uint64
	// Describe renders input i for a mismatch report.
	Describe func(i int) string
}

// Floats are the float dtypes the engine encodes to; Narrow those below f32.
var (
	Floats = []numerics.DType{numerics.F32, numerics.F16, numerics.BF16, numerics.F8E4M3, numerics.F8E5M2}
	Narrow = []numerics.DType{numerics.F16, numerics.BF16, numerics.F8E4M3, numerics.F8E5M2}
	// Targets of a cast from a float: every float, both ints (truncating, saturating) and bool.
	Targets = []numerics.DType{numerics.F32, numerics.F16, numerics.BF16, numerics.F8E4M3, numerics.F8E5M2,
		numerics.I8, numerics.I32, numerics.Bool}
)

// bitsOf is x in src's storage, built from the IEEE layouts with package math (not numerics):
// an f64 as is, an f32 by Go's conversion (exact for every input Inputs gives).
func bitsOf(src numerics.DType, x float64) uint64 {
	if src == numerics.F32 {
		return uint64(math.Float32bits(float32(x)))
	}
	return math.Float64bits(x)
}

func hexOf(d numerics.DType, b uint64) string { return fmt.Sprintf("0x%0*X", 2*d.Size(), b) }

// EncodeCase is numerics.Encode of src values to dst.
func EncodeCase(src, dst numerics.DType) Case {
	xs := Inputs(src, dst)
	c := Case{Name: fmt.Sprintf("encode/%s->%s", src, dst), Values: xs, Out: dst, Want: make([]uint64, len(xs))}
	for i, x := range xs {
		c.Want[i] = EncodeDType(dst, x)
	}
	c.Describe = func(i int) string { return fmt.Sprintf("%v (%s)", xs[i], hexOf(src, bitsOf(src, xs[i]))) }
	return c
}

// CastCase is the cast op from src to dst over Inputs (float src) or every pattern (narrow
// float src: the decode path too) or IntInputs (int src).
func CastCase(src, dst numerics.DType) (Case, error) {
	var bits []uint64
	switch {
	case src == numerics.F64 || src == numerics.F32:
		for _, x := range Inputs(src, dst) {
			bits = append(bits, bitsOf(src, x))
		}
	case src.IsInt():
		for _, v := range IntInputs(src) {
			bits = append(bits, WrapDType(src, v))
		}
	default:
		for p := range uint64(1) << (8 * src.Size()) {
			bits = append(bits, p)
		}
	}
	x := tensor.New(src, []int{len(bits)})
	want := make([]uint64, len(bits))
	for i, b := range bits {
		x.SetBits(i, b)
		v := DecodeDType(src, b)
		if src.IsInt() && dst.IsInt() {
			want[i] = WrapDType(dst, int64(v)) // int -> int wraps, as the cast op defines
		} else {
			want[i] = EncodeDType(dst, v)
		}
	}
	b := graph.NewBuilder("cast_" + src.String() + "_" + dst.String())
	in := b.Input("x", src, len(bits))
	b.Output(b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(dst)}, in))
	g, err := b.Build()
	if err != nil {
		return Case{}, err
	}
	return Case{Name: fmt.Sprintf("cast/%s->%s", src, dst), Graph: g, Inputs: map[string]*tensor.Tensor{"x": x}, Out: dst, Want: want,
		Describe: func(i int) string {
			return fmt.Sprintf("%s %s (%v)", src, hexOf(src, bits[i]), DecodeDType(src, bits[i]))
		}}, nil
}

// operands are patterns of a narrow float dtype for the store routes: every finite pattern of
// an 8-bit format, a spread of a 16-bit one, both signs; and small factors whose products with
// them need one rounding (exact in f32 and f64, often a tie).
func operands(d numerics.DType) (xs []uint64, factors []uint64) {
	f, _ := FormatOf(d)
	step := uint64(1)
	if d.Size() > 1 {
		step = 7
	}
	for p := uint64(0); p <= f.maxBits(); p += step {
		xs = append(xs, p, p|f.signBit())
	}
	for _, v := range []float64{0.5, 0.75, 1.5, 3, 5, 0.625} {
		if p := f.Encode(v); f.Decode(p) == v {
			factors = append(factors, p, p|f.signBit())
		}
	}
	// 1 + one ulp: its product with an odd significand needs one bit more than d has.
	factors = append(factors, f.Encode(1)+1)
	return xs, factors
}

// StoreCases are the kernels' own rounding of an exact result to a narrow output dtype d:
// mul (an elementwise kernel), matmul with K = 1 (an MMA accumulated in f32, then stored) and
// reduce_sum of pairs (a row reduction in f32, then stored), each over inputs whose result
// is exact in f32 and f64, so the only rounding is the one to d.
func StoreCases(d numerics.DType) ([]Case, error) {
	f, _ := FormatOf(d)
	xs, fs := operands(d)
	var cases []Case
	// mul: every x times every factor.
	{
		a, b := tensor.New(d, []int{len(xs), len(fs)}), tensor.New(d, []int{len(xs), len(fs)})
		want := make([]uint64, 0, len(xs)*len(fs))
		for i, x := range xs {
			for j, y := range fs {
				a.SetBits(i*len(fs)+j, x)
				b.SetBits(i*len(fs)+j, y)
				want = append(want, f.Encode(f.Decode(x)*f.Decode(y)))
			}
		}
		g, err := binaryGraph("mul", d, a.Shape)
		if err != nil {
			return nil, err
		}
		cases = append(cases, Case{Name: "store/mul/" + d.String(), Graph: g, Inputs: map[string]*tensor.Tensor{"a": a, "b": b}, Out: d, Want: want,
			Describe: func(i int) string { return pairDesc(d, a.Bits(i), "*", b.Bits(i)) }})
	}
	// matmul [M,1] x [1,N]: out[i,j] = x_i * y_j accumulated in f32 (0 + one exact product).
	{
		a, b := tensor.New(d, []int{len(xs), 1}), tensor.New(d, []int{1, len(fs)})
		for i, x := range xs {
			a.SetBits(i, x)
		}
		for j, y := range fs {
			b.SetBits(j, y)
		}
		want := make([]uint64, 0, len(xs)*len(fs))
		for _, x := range xs {
			for _, y := range fs {
				p := 0 + f.Decode(x)*f.Decode(y)   // the accumulator starts at +0: -0 products give +0
				if math.Abs(p) > math.MaxFloat32 { // the f32 accumulator overflows first
					p = math.Inf(int(math.Copysign(1, p)))
				}
				want = append(want, f.Encode(p))
			}
		}
		bl := graph.NewBuilder("store_matmul_" + d.String())
		bl.Output(bl.Op("matmul", nil, bl.Input("a", d, len(xs), 1), bl.Input("b", d, 1, len(fs))))
		g, err := bl.Build()
		if err != nil {
			return nil, err
		}
		cases = append(cases, Case{Name: "store/matmul/" + d.String(), Graph: g, Inputs: map[string]*tensor.Tensor{"a": a, "b": b}, Out: d, Want: want,
			Describe: func(i int) string { return pairDesc(d, a.Bits(i/len(fs)), "*", b.Bits(i%len(fs))) }})
	}
	// reduce_sum over rows (x, x·2^-k): the f32 sum is exact, and for k = Man+1 a tie in d.
	{
		var pairs [][2]uint64
		for _, x := range xs {
			v := f.Decode(x)
			if v != v || math.IsInf(v, 0) {
				continue
			}
			for _, k := range []int{1, int(f.Man), int(f.Man) + 1, int(f.Man) + 2} {
				if y := f.Encode(math.Ldexp(v, -k)); f.Decode(y) == math.Ldexp(v, -k) {
					pairs = append(pairs, [2]uint64{x, y})
				}
			}
		}
		t := tensor.New(d, []int{len(pairs), 2})
		want := make([]uint64, len(pairs))
		for i, p := range pairs {
			t.SetBits(2*i, p[0])
			t.SetBits(2*i+1, p[1])
			acc := 0.0 // the row fold starts at +0, left to right
			acc += f.Decode(p[0])
			acc += f.Decode(p[1])
			want[i] = f.Encode(acc)
		}
		bl := graph.NewBuilder("store_reduce_" + d.String())
		bl.Output(bl.Op("reduce_sum", graph.Attrs{"axes": graph.Ints(1)}, bl.Input("x", d, len(pairs), 2)))
		g, err := bl.Build()
		if err != nil {
			return nil, err
		}
		cases = append(cases, Case{Name: "store/reduce_sum/" + d.String(), Graph: g, Inputs: map[string]*tensor.Tensor{"x": t}, Out: d, Want: want,
			Describe: func(i int) string { return pairDesc(d, pairs[i][0], "+", pairs[i][1]) }})
	}
	return cases, nil
}

func binaryGraph(op string, d numerics.DType, shape []int) (*graph.Graph, error) {
	b := graph.NewBuilder("store_" + op + "_" + d.String())
	b.Output(b.Op(op, nil, b.Input("a", d, shape...), b.Input("b", d, shape...)))
	return b.Build()
}

func pairDesc(d numerics.DType, x uint64, op string, y uint64) string {
	return fmt.Sprintf("%s %s %s %s (%v %s %v)", hexOf(d, x), op, d, hexOf(d, y), DecodeDType(d, x), op, DecodeDType(d, y))
}

// Run computes the case's output: numerics.Encode of each value, or the graph compiled and run
// on b. It returns the output's bit patterns.
func (c Case) Run(b backend.Backend) ([]uint64, error) {
	if c.Graph == nil {
		got := make([]uint64, len(c.Values))
		for i, x := range c.Values {
			got[i] = numerics.Encode(c.Out, x)
		}
		return got, nil
	}
	p, err := compiler.Compile(c.Graph, compiler.Options{})
	if err != nil {
		return nil, err
	}
	in := map[string]*tensor.Tensor{}
	for k, v := range c.Inputs {
		in[k] = v.Clone()
	}
	outs, err := b.Run(p, in)
	if err != nil {
		return nil, err
	}
	if len(outs) != 1 || outs[0].DType != c.Out || outs[0].Len() != len(c.Want) {
		return nil, fmt.Errorf("%s: unexpected outputs", c.Name)
	}
	got := make([]uint64, len(c.Want))
	for i := range got {
		got[i] = outs[0].Bits(i)
	}
	return got, nil
}

// Compare reports the elements whose bits differ from Want (the first few in full), or nil.
func (c Case) Compare(got []uint64) error {
	var diffs []string
	n := 0
	for i, w := range c.Want {
		if got[i] == w || (c.Out == numerics.F64 && math.IsNaN(math.Float64frombits(got[i])) && math.IsNaN(math.Float64frombits(w))) {
			continue // f64 keeps NaN payloads as they come (docs/numerics.md): any NaN is the answer
		}
		n++
		if len(diffs) < 5 {
			diffs = append(diffs, fmt.Sprintf("%s -> got %s (%v), want %s (%v)", c.Describe(i),
				hexOf(c.Out, got[i]), DecodeDType(c.Out, got[i]), hexOf(c.Out, w), DecodeDType(c.Out, w)))
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%s: %d of %d elements differ from the independent encoder bit for bit; %s", c.Name, n, len(c.Want), strings.Join(diffs, "; "))
}

// AllCases lists every route of the suite: Encode and the cast op from f64 and f32 to every
// target, the cast op from every narrow float pattern (decoding) to every float, int -> int
// (wrapping) and int -> float, and the stores of mul, matmul and reduce_sum to every narrow
// float, data movement of every pattern (bit copies), and every accumulator the verifier
// accepts for matmul and the reductions (AccumCases).
func AllCases() ([]Case, error) {
	var out []Case
	for _, src := range []numerics.DType{numerics.F64, numerics.F32} {
		for _, dst := range Targets {
			out = append(out, EncodeCase(src, dst))
			c, err := CastCase(src, dst)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	for _, src := range append(append([]numerics.DType{}, Narrow...), numerics.I8, numerics.I32) {
		for _, dst := range append(append([]numerics.DType{numerics.F64}, Floats...), numerics.I8, numerics.I32) {
			if src == dst {
				continue
			}
			c, err := CastCase(src, dst)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	for _, d := range Narrow {
		cs, err := StoreCases(d)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	mv, err := MovementCases()
	if err != nil {
		return nil, err
	}
	ac, err := AccumCases()
	return append(append(out, mv...), ac...), err
}

// MovementCases are data movement (transpose, slice, concat, reshape) of every pattern of each
// dtype (a spread for f32 and f64, with NaN payloads and signs, -0 and ±Inf): bit copies, so
// each output element is the input pattern it comes from, unchanged (fp8 e5m2 ±Inf included,
// which a decode and re-encode would saturate to ±57344).
func MovementCases() ([]Case, error) {
	var out []Case
	for _, d := range numerics.All {
		var pats []uint64
		switch d.Size() {
		case 1, 2:
			for p := range uint64(1) << (8 * d.Size()) {
				pats = append(pats, p)
			}
		case 4:
			pats = []uint64{0, 0x80000000, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFC00000, 0x7FC12345, 1, 0x3F800000, 0x80000001}
		default:
			pats = []uint64{0, 1 << 63, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF0000000000001, 0xFFF8000000000000, 0x7FF8000000012345, 1}
		}
		if d == numerics.Bool {
			pats = []uint64{0, 1}
		}
		cols := 16
		rows := (len(pats) + cols - 1) / cols
		x := tensor.New(d, []int{rows, cols})
		for i := range x.Len() {
			x.SetBits(i, pats[i%len(pats)])
		}
		b := graph.NewBuilder("move_" + d.String())
		in := b.Input("x", d, rows, cols)
		t := b.Named("t", "transpose", graph.Attrs{"perm": graph.Ints(1, 0)}, in)
		s := b.Named("s", "slice", graph.Attrs{"starts": graph.Ints(1, 0), "ends": graph.Ints(int64(cols), int64(rows))}, t)
		c := b.Named("c", "concat", graph.Attrs{"axis": graph.Int(0)}, s, t)
		b.Output(b.Named("r", "reshape", graph.Attrs{"shape": graph.Ints(-1)}, c))
		g, err := b.Build()
		if err != nil {
			return nil, err
		}
		// Expected: the same index arithmetic, on bits.
		var want []uint64
		at := func(i, j int) uint64 { return x.Bits(j*cols + i) } // transpose: t[i][j] = x[j][i]
		for i := 1; i < cols; i++ {
			for j := range rows {
				want = append(want, at(i, j))
			}
		}
		for i := range cols {
			for j := range rows {
				want = append(want, at(i, j))
			}
		}
		out = append(out, Case{Name: "movement/" + d.String(), Graph: g, Inputs: map[string]*tensor.Tensor{"x": x}, Out: d, Want: want,
			Describe: func(i int) string { return "element " + fmt.Sprint(i) }})
	}
	return out, nil
}
