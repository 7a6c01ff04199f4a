package bench

import (
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/harness/accum"
)

var (
	f32, bf16 = numerics.F32, numerics.BF16
)

// opDef is one benchmark op: how to build it in the engine, how big a shape is, what it costs
// and how its output is judged. The torch side is the op of the same name in torch_bench.py.
type opDef struct {
	name   string
	dims   []string // what each shape dim means, e.g. M N K
	dtypes []numerics.DType
	shapes [][]int
	inputs func(shape []int) []input
	build  func(b *graph.Builder, in []*graph.Value) *graph.Value
	flops  func(shape []int) float64
	// reduce is the reduction length that scales the tolerance (docs/tolerances.md).
	reduce func(shape []int) int
	tol    func(dt numerics.DType, k int) harness.Tolerance
	// slice gives the input shapes of the small reference check that keeps r rows (queries,
	// rows of A, ...). Each sliced input is a prefix of the full input's data and the slice's
	// output a prefix of the full output's, so no gather is needed.
	slice func(shape []int, r int) [][]int
	// ownDTypes: the op exists for its dtypes only (fp8gemm), so --dtypes does not apply to it.
	ownDTypes bool
	// inputDTypes names the inputs whose dtype is not the case's (fp8gemm's f32 scales).
	inputDTypes map[string]numerics.DType
	// rowsDim names the dim the reference check's slice cuts when it is not R, M or S
	// (conv2d's images, B).
	rowsDim string
	// accumBound, when set, is the op's error bound over the whole output on a device whose
	// tensor cores accumulate in fewer bits than f32 (harness/accum; fp8gemm): on such a
	// device the checks use the output dtype's default tolerance plus a per-element bound
	// instead of tol (runCase, refCheck).
	accumBound func(m accum.Model, in map[string]*tensor.Tensor) ([]float64, error)
}

// inputDType is the dtype of input in in a case of dtype dt.
func (o opDef) inputDType(in input, dt numerics.DType) numerics.DType {
	if d, ok := o.inputDTypes[in.name]; ok {
		return d
	}
	return dt
}

// input is one graph input: its shape and distribution.
type input struct {
	name  string
	shape []int
	dist  harness.Dist
}

var (
	distNormal = harness.Dist{Kind: harness.DistNormal}
	distLogits = harness.Dist{Kind: harness.DistUniform, Lo: -4, Hi: 4}
	distGamma  = harness.Dist{Kind: harness.DistUniform, Lo: 0.5, Hi: 1.5}
	distScale  = harness.Dist{Kind: harness.DistPositive, Lo: 0.25, Hi: 1}
)

func rowsInputs(names ...string) func(shape []int) []input {
	return func(s []int) []input {
		var in []input
		for _, n := range names {
			switch n {
			case "gamma":
				in = append(in, input{n, []int{s[1]}, distGamma})
			case "beta":
				in = append(in, input{n, []int{s[1]}, distNormal})
			case "logits":
				in = append(in, input{"x", slices.Clone(s), distLogits})
			default:
				in = append(in, input{n, slices.Clone(s), distNormal})
			}
		}
		return in
	}
}

// rowsSlice keeps r rows of every [R, C] input; per-column inputs (gamma, beta) stay whole.
func rowsSlice(names ...string) func(s []int, r int) [][]int {
	return func(s []int, r int) [][]int {
		var out [][]int
		for _, n := range names {
			if n == "gamma" || n == "beta" {
				out = append(out, []int{s[1]})
			} else {
				out = append(out, []int{r, s[1]})
			}
		}
		return out
	}
}

func cols(s []int) int { return s[1] }

func none([]int) float64 { return 0 }

// Tolerance rules, as the golden catalogue's (golden/tolerance.go): reductions scale the
// default with sqrt(k); probabilities and attention outputs keep the default atol.
func tolReduce(dt numerics.DType, k int) harness.Tolerance {
	return harness.DefaultTolerance(dt).ForReduction(k)
}

func tolProb(dt numerics.DType, k int) harness.Tolerance {
	d := harness.DefaultTolerance(dt)
	t := d.ForReduction(k)
	t.ATol = d.ATol
	return t
}

func tolAttention(dt numerics.DType, k int) harness.Tolerance {
	t := tolProb(dt, k)
	switch dt {
	case numerics.F16:
		t.ATol = math.Ldexp(1, -11)
	case numerics.BF16:
		t.ATol = math.Ldexp(1, -8)
	}
	return t
}

func tolExact(numerics.DType, int) harness.Tolerance { return harness.Bitwise() }

func one(op string, attrs graph.Attrs) func(b *graph.Builder, in []*graph.Value) *graph.Value {
	return func(b *graph.Builder, in []*graph.Value) *graph.Value { return b.Op(op, attrs, in...) }
}

// ops is the benchmark table, in the order rows are run and printed. The copy rows come
// first: their bandwidth is what the memory-bound rows are measured against.
var ops = []opDef{
	{
		name: "copy", dims: []string{"R", "C"}, dtypes: []numerics.DType{f32, bf16}, shapes: [][]int{{8192, 8192}},
		inputs: rowsInputs("x"),
		build: func(b *graph.Builder, in []*graph.Value) *graph.Value {
			return b.Op("reshape", graph.Attrs{"shape": graph.Ints(int64(in[0].Type.NumElems()))}, in...)
		},
		flops: none, reduce: func([]int) int { return 1 }, tol: tolExact, slice: rowsSlice("x"),
	},
	{
		name: "matmul", dims: []string{"M", "N", "K"}, dtypes: []numerics.DType{bf16}, shapes: [][]int{{4096, 4096, 4096}, {8192, 8192, 8192}},
		inputs: func(s []int) []input {
			return []input{{"a", []int{s[0], s[2]}, distNormal}, {"b", []int{s[2], s[1]}, distNormal}}
		},
		build:  one("matmul", nil),
		flops:  func(s []int) float64 { return 2 * float64(s[0]) * float64(s[1]) * float64(s[2]) },
		reduce: func(s []int) int { return s[2] }, tol: tolReduce,
		slice: func(s []int, r int) [][]int { return [][]int{{r, s[2]}, {s[2], s[1]}} },
	},
	{
		name: "batch_matmul", dims: []string{"B", "M", "N", "K"}, dtypes: []numerics.DType{bf16}, shapes: [][]int{{8, 2048, 2048, 2048}},
		inputs: func(s []int) []input {
			return []input{{"a", []int{s[0], s[1], s[3]}, distNormal}, {"b", []int{s[0], s[3], s[2]}, distNormal}}
		},
		build:  one("batch_matmul", nil),
		flops:  func(s []int) float64 { return 2 * float64(s[0]) * float64(s[1]) * float64(s[2]) * float64(s[3]) },
		reduce: func(s []int) int { return s[3] }, tol: tolReduce,
		// The reference keeps batch 0: r rows of A[0] and all of B[0].
		slice: func(s []int, r int) [][]int { return [][]int{{1, r, s[3]}, {1, s[3], s[2]}} },
	},
	{
		// torch._scaled_mm's GEMM: e4m3 A [M,K] and B [N,K] (torch gets B^T, the column-major
		// operand it wants), per-tensor f32 scales, f32 accumulation, bf16 out.
		name: "fp8gemm", dims: []string{"M", "N", "K"}, dtypes: []numerics.DType{numerics.F8E4M3}, shapes: [][]int{{8192, 8192, 8192}},
		ownDTypes: true, inputDTypes: map[string]numerics.DType{"scale_a": f32, "scale_b": f32},
		inputs: func(s []int) []input {
			return []input{{"a", []int{s[0], s[2]}, distNormal}, {"b", []int{s[1], s[2]}, distNormal},
				{"scale_a", []int{}, distScale}, {"scale_b", []int{1}, distScale}}
		},
		build:  one("scaled_matmul", graph.Attrs{"out_dtype": graph.DTypeAttr(bf16)}),
		flops:  func(s []int) float64 { return 2 * float64(s[0]) * float64(s[1]) * float64(s[2]) },
		reduce: func(s []int) int { return s[2] },
		tol:    func(_ numerics.DType, k int) harness.Tolerance { return tolReduce(bf16, k) }, // judged as its bf16 output
		slice:  func(s []int, r int) [][]int { return [][]int{{r, s[2]}, {s[1], s[2]}, {}, {1}} },
		// The whole 8192^3 output's bound by row norms (O((M+N)K)); the sliced reference check
		// sums |a||b| exactly.
		accumBound: func(m accum.Model, in map[string]*tensor.Tensor) ([]float64, error) {
			return accum.ScaledMatmulNorms(m, in["a"], in["b"], in["scale_a"], in["scale_b"])
		},
	},
	attentionDef("attention", false),
	attentionDef("attention_causal", true),
	{
		name: "softmax", dims: []string{"R", "C"}, dtypes: []numerics.DType{f32, bf16}, shapes: [][]int{{8192, 8192}},
		inputs: rowsInputs("logits"), build: one("softmax", nil),
		flops: none, reduce: cols, tol: tolProb, slice: rowsSlice("x"),
	},
	{
		name: "log_softmax", dims: []string{"R", "C"}, dtypes: []numerics.DType{f32, bf16}, shapes: [][]int{{8192, 8192}},
		inputs: rowsInputs("logits"), build: one("log_softmax", nil),
		flops: none, reduce: cols, tol: tolReduce, slice: rowsSlice("x"),
	},
	{
		name: "layernorm", dims: []string{"R", "C"}, dtypes: []numerics.DType{f32, bf16}, shapes: [][]int{{8192, 8192}},
		inputs: rowsInputs("x", "gamma", "beta"), build: one("layernorm", nil),
		flops: none, reduce: cols, tol: tolReduce, slice: rowsSlice("x", "gamma", "beta"),
	},
	{
		name: "rmsnorm", dims: []string{"R", "C"}, dtypes: []numerics.DType{f32, bf16}, shapes: [][]int{{8192, 8192}},
		inputs: rowsInputs("x", "gamma"), build: one("rmsnorm", nil),
		flops: none, reduce: cols, tol: tolReduce, slice: rowsSlice("x", "gamma"),
	},
	{
		// gelu_tanh(x*y + z): three elementwise ops the compiler fuses into one kernel; torch
		// (eager) runs three.
		name: "elementwise", dims: []string{"R", "C"}, dtypes: []numerics.DType{f32, bf16}, shapes: [][]int{{8192, 8192}},
		inputs: rowsInputs("x", "y", "z"),
		build: func(b *graph.Builder, in []*graph.Value) *graph.Value {
			return b.Op("gelu", graph.Attrs{"approx": graph.String("tanh")}, b.Op("add", nil, b.Op("mul", nil, in[0], in[1]), in[2]))
		},
		flops: none, reduce: func([]int) int { return 1 },
		tol: func(dt numerics.DType, _ int) harness.Tolerance {
			// torch evaluates tanh in f32 (a few ulp), the engine in f64 and rounds once.
			t := harness.DefaultTolerance(dt)
			if dt == numerics.F32 {
				t.RTol *= 4
			}
			return t
		},
		slice: rowsSlice("x", "y", "z"),
	},
	{
		// f32 -> bf16 and bf16 -> f32: the cast fused into the load and the store.
		name: "cast", dims: []string{"R", "C"}, dtypes: []numerics.DType{f32, bf16}, shapes: [][]int{{8192, 8192}},
		inputs: rowsInputs("x"),
		build: func(b *graph.Builder, in []*graph.Value) *graph.Value {
			to := bf16
			if in[0].Type.DType == bf16 {
				to = f32
			}
			return b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(to)}, in...)
		},
		flops: none, reduce: func([]int) int { return 1 }, tol: tolExact, slice: rowsSlice("x"),
	},
	{
		name: "reduce_sum", dims: []string{"R", "C"}, dtypes: []numerics.DType{f32}, shapes: [][]int{{8192, 8192}},
		inputs: rowsInputs("x"), build: one("reduce_sum", graph.Attrs{"axes": graph.Ints(-1)}),
		flops: none, reduce: cols, tol: tolReduce, slice: rowsSlice("x"),
	},
	{
		name: "reduce_max", dims: []string{"R", "C"}, dtypes: []numerics.DType{f32}, shapes: [][]int{{8192, 8192}},
		inputs: rowsInputs("x"), build: one("reduce_max", graph.Attrs{"axes": graph.Ints(-1)}),
		flops: none, reduce: cols, tol: tolExact, slice: rowsSlice("x"),
	},
	// Over the columns (axis 0): no prefix of the input gives a prefix of the output, so the
	// reference check runs on the whole case (dims named K, N: rowCount is 1, fullSlice).
	{
		name: "reduce_sum_cols", dims: []string{"K", "N"}, dtypes: []numerics.DType{f32}, shapes: [][]int{{8192, 8192}},
		inputs: rowsInputs("x"), build: one("reduce_sum", graph.Attrs{"axes": graph.Ints(0)}),
		flops: none, reduce: func(s []int) int { return s[0] }, tol: tolReduce, slice: fullSlice,
	},
	{
		name: "reduce_max_cols", dims: []string{"K", "N"}, dtypes: []numerics.DType{f32}, shapes: [][]int{{8192, 8192}},
		inputs: rowsInputs("x"), build: one("reduce_max", graph.Attrs{"axes": graph.Ints(0)}),
		flops: none, reduce: func(s []int) int { return s[0] }, tol: tolExact, slice: fullSlice,
	},
	{
		name: "transpose", dims: []string{"A", "B"}, dtypes: []numerics.DType{bf16}, shapes: [][]int{{8192, 8192}},
		inputs: rowsInputs("x"), build: one("transpose", graph.Attrs{"perm": graph.Ints(1, 0)}),
		flops: none, reduce: func([]int) int { return 1 }, tol: tolExact, slice: fullSlice,
	},
	fftDef("fft_c2c", "fft"),
	fftDef("fft_r2c", "rfft"),
	conv2dDef(),
}

// fullSlice is the whole case: the reference check of an op whose output prefix is not
// computed from an input prefix (a reduction over columns, a transpose).
func fullSlice(s []int, _ int) [][]int { return [][]int{slices.Clone(s)} }

func attentionDef(name string, causal bool) opDef {
	return opDef{
		name: name, dims: []string{"B", "H", "S", "D"}, dtypes: []numerics.DType{bf16}, shapes: [][]int{{4, 16, 4096, 128}},
		inputs: func(s []int) []input {
			return []input{{"q", slices.Clone(s), distNormal}, {"k", slices.Clone(s), distNormal}, {"v", slices.Clone(s), distNormal}}
		},
		build: one("attention", graph.Attrs{"causal": graph.Bool(causal)}),
		flops: func(s []int) float64 {
			f := 4 * float64(s[0]) * float64(s[1]) * float64(s[2]) * float64(s[2]) * float64(s[3])
			if causal {
				f /= 2
			}
			return f
		},
		reduce: func(s []int) int { return s[2] }, tol: tolAttention,
		// The reference keeps head 0: queries 0..r-1 against all keys and values of head 0
		// (with a causal mask those queries see the same keys as in the full run).
		slice: func(s []int, r int) [][]int {
			return [][]int{{1, 1, r, s[3]}, {1, 1, s[2], s[3]}, {1, 1, s[2], s[3]}}
		},
	}
}

// opByName finds an op of the table.
func opByName(name string) (opDef, bool) {
	for _, o := range ops {
		if o.name == name {
			return o, true
		}
	}
	return opDef{}, false
}

// OpNames lists the benchmark ops in table order.
func OpNames() []string {
	names := make([]string, len(ops))
	for i, o := range ops {
		names[i] = o.name
	}
	return names
}

// bytesMoved is the fewest bytes the op must move through device memory: every input read
// once and the output written once (each in its own dtype: a cast's differ).
func bytesMoved(o opDef, dt numerics.DType, shape []int, out *tensor.Tensor) float64 {
	n := out.Len() * out.DType.Size()
	for _, in := range o.inputs(shape) {
		n += elems(in.shape) * o.inputDType(in, dt).Size()
	}
	return float64(n)
}

func elems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// RowOps maps each registry op to the benchmark rows whose graph holds it (each row's graph
// built at its first shape and dtype, never run): `tessera-qa ops --coverage` reads it.
func RowOps() (map[string][]string, error) {
	out := map[string][]string{}
	for _, o := range ops {
		c := Case{Op: o.name, DType: o.dtypes[0], Shape: o.shapes[0]}
		g, err := buildGraph(o, c, shapesOf(o.inputs(c.Shape)))
		if err != nil {
			return nil, err
		}
		for _, n := range g.Nodes {
			if rows := out[n.Op]; len(rows) == 0 || rows[len(rows)-1] != o.name {
				out[n.Op] = append(out[n.Op], o.name)
			}
		}
	}
	return out, nil
}
