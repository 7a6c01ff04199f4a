package golden

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Empty tensors (issue 21): cases with a dim of size 0, tagged "empty-...", appended after an
// op's own cases for one dtype per op (f32, or the op's only dtype; int32 too for
// reduce_sum, whose integer identity differs in kind). Two sorts:
//   - an empty output: the check is its dtype and shape, exactly (harness.ModeEmpty);
//   - a non-empty output computed from an empty operand (a sum over an empty axis, K = 0,
//     attention over no keys): every element is the value over nothing that torch gives
//     (0, NaN for 0/0, -Inf for logsumexp), checked with an exact tolerance, since an
//     identity is not rounded from anything.
// Max over an empty axis has no identity: the verifier refuses it (graph's negative tests),
// so it has no case here; max along a non-empty axis of an empty tensor does.

// emptyIn is one input of an empty case.
type emptyIn struct {
	name  string
	dt    numerics.DType // 0: the case's dtype
	shape []int
}

type emptyCase struct {
	tag   string
	ins   []emptyIn
	attrs graph.Attrs
}

// emptyWithData are the cases whose output holds the non-empty operands' elements (concat
// with empty pieces): ordinary cases, compared bitwise as every movement case is.
var emptyWithData = map[string]bool{"concat/empty-0x3+2x3+0x3": true}

func ein(name string, shape ...int) emptyIn { return emptyIn{name: name, shape: shape} }

var (
	emptyUnary  = []emptyCase{{"empty-3x0", []emptyIn{ein("x", 3, 0)}, nil}}
	emptyBinary = []emptyCase{{"empty-0x4+4", []emptyIn{ein("a", 0, 4), ein("b", 4)}, nil}}
	// emptyCases lists ops whose cases differ from the plain unary/binary ones.
	emptyCases = map[string][]emptyCase{
		"full_like": {{"empty-3x0", []emptyIn{ein("x", 3, 0)}, graph.Attrs{"value": graph.Float(2)}}},
		"cast":      {{"empty-0x5-to-bf16", []emptyIn{ein("x", 0, 5)}, graph.Attrs{"to": graph.DTypeAttr(numerics.BF16)}}},
		"reduce_sum": {
			{"empty-3x0-axis1", []emptyIn{ein("x", 3, 0)}, graph.Attrs{"axes": graph.Ints(1)}},
			{"empty-0x4-axis0-keep", []emptyIn{ein("x", 0, 4)}, graph.Attrs{"axes": graph.Ints(0), "keepdims": graph.Bool(true)}},
			{"empty-0x4-axis1", []emptyIn{ein("x", 0, 4)}, graph.Attrs{"axes": graph.Ints(1)}},
			{"empty-2x0x3-all", []emptyIn{ein("x", 2, 0, 3)}, nil},
		},
		"reduce_mean": {
			{"empty-3x0-axis1-keep", []emptyIn{ein("x", 3, 0)}, graph.Attrs{"axes": graph.Ints(1), "keepdims": graph.Bool(true)}},
			{"empty-0x4-all", []emptyIn{ein("x", 0, 4)}, nil},
			{"empty-0x4-axis1", []emptyIn{ein("x", 0, 4)}, graph.Attrs{"axes": graph.Ints(1)}},
		},
		"reduce_max": {{"empty-0x4-axis1", []emptyIn{ein("x", 0, 4)}, graph.Attrs{"axes": graph.Ints(1)}}},
		"softmax": {
			{"empty-3x0", []emptyIn{ein("x", 3, 0)}, nil},
			{"empty-0x5-axis0", []emptyIn{ein("x", 0, 5)}, graph.Attrs{"axis": graph.Int(0)}},
		},
		"layernorm": {
			{"empty-0x4", []emptyIn{ein("x", 0, 4), ein("gamma", 4), ein("beta", 4)}, nil},
			{"empty-3x0", []emptyIn{ein("x", 3, 0), ein("gamma", 0), ein("beta", 0)}, nil},
		},
		"rmsnorm": {
			{"empty-0x4", []emptyIn{ein("x", 0, 4), ein("gamma", 4)}, nil},
			{"empty-3x0", []emptyIn{ein("x", 3, 0), ein("gamma", 0)}, nil},
		},
		"matmul": {
			{"empty-2x0x3-k0", []emptyIn{ein("a", 2, 0), ein("b", 0, 3)}, nil},
			{"empty-0x4x3-m0", []emptyIn{ein("a", 0, 4), ein("b", 4, 3)}, nil},
			{"empty-2x4x0-n0-tb", []emptyIn{ein("a", 2, 4), ein("b", 0, 4)}, graph.Attrs{"transpose_b": graph.Bool(true)}},
		},
		"batch_matmul": {
			{"empty-b0", []emptyIn{ein("a", 0, 2, 4), ein("b", 0, 4, 3)}, nil},
			{"empty-2x3x0x5-k0", []emptyIn{ein("a", 2, 3, 0), ein("b", 2, 0, 5)}, nil},
		},
		"scaled_matmul": {
			{"empty-2x0x3-k0", []emptyIn{ein("a", 2, 0), ein("b", 3, 0), {"scale_a", numerics.F32, nil}, {"scale_b", numerics.F32, nil}}, nil},
			{"empty-0x16x3-m0", []emptyIn{ein("a", 0, 16), ein("b", 3, 16), {"scale_a", numerics.F32, nil}, {"scale_b", numerics.F32, nil}}, nil},
		},
		"attention": {
			{"empty-sk0", []emptyIn{ein("q", 2, 5, 4), ein("k", 2, 0, 4), ein("v", 2, 0, 3)}, nil},
			{"empty-sq0-causal", []emptyIn{ein("q", 2, 0, 4), ein("k", 2, 6, 4), ein("v", 2, 6, 3)}, graph.Attrs{"causal": graph.Bool(true)}},
			{"empty-b0", []emptyIn{ein("q", 0, 5, 4), ein("k", 0, 6, 4), ein("v", 0, 6, 3)}, nil},
		},
		"attention_lse": {
			{"empty-sk0", []emptyIn{ein("q", 2, 5, 4), ein("k", 2, 0, 4)}, nil},
			{"empty-sq0", []emptyIn{ein("q", 2, 0, 4), ein("k", 2, 6, 4)}, nil},
		},
		"attention_grad": {
			{"empty-sk0-dq", attnGradIns(5, 0), graph.Attrs{"wrt": graph.String("q")}},
			{"empty-sk0-dk", attnGradIns(5, 0), graph.Attrs{"wrt": graph.String("k")}},
			{"empty-sq0-dk", attnGradIns(0, 6), graph.Attrs{"wrt": graph.String("k")}},
			{"empty-sq0-dv", attnGradIns(0, 6), graph.Attrs{"wrt": graph.String("v")}},
		},
		"transpose": {{"empty-3x0x2-perm201", []emptyIn{ein("x0", 3, 0, 2)}, graph.Attrs{"perm": graph.Ints(2, 0, 1)}}},
		"reshape": {
			{"empty-3x0x2-to-0x6", []emptyIn{ein("x0", 3, 0, 2)}, graph.Attrs{"shape": graph.Ints(0, 6)}},
			{"empty-3x0x2-to-m1x2", []emptyIn{ein("x0", 3, 0, 2)}, graph.Attrs{"shape": graph.Ints(-1, 2)}},
		},
		"slice": {{"empty-4x3-rows2to2", []emptyIn{ein("x0", 4, 3)}, graph.Attrs{"starts": graph.Ints(2, 0), "ends": graph.Ints(2, 3)}}},
		"concat": {
			{"empty-0x3+2x3+0x3", []emptyIn{ein("x0", 0, 3), ein("x1", 2, 3), ein("x2", 0, 3)}, graph.Attrs{"axis": graph.Int(0)}},
			{"empty-2x0+2x0-axis1", []emptyIn{ein("x0", 2, 0), ein("x1", 2, 0)}, graph.Attrs{"axis": graph.Int(1)}},
		},
		"mse_loss": {{"empty-0x3", []emptyIn{ein("a", 0, 3), ein("b", 0, 3)}, nil}},
	}
)

// attnGradIns are attention_grad's inputs q, k, v, o, do, lse for 2 heads of D = 4, Dv = 3.
func attnGradIns(sq, sk int) []emptyIn {
	return []emptyIn{ein("q", 2, sq, 4), ein("k", 2, sk, 4), ein("v", 2, sk, 3), ein("o", 2, sq, 3), ein("do", 2, sq, 3),
		{"lse", numerics.F32, []int{2, sq}}}
}

// emptyDTypes is the dtypes an op's empty cases use.
func emptyDTypes(op string) []numerics.DType {
	switch op {
	case "scaled_matmul":
		return []numerics.DType{numerics.F8E4M3}
	case "reduce_sum":
		return []numerics.DType{numerics.F32, numerics.I32}
	}
	return []numerics.DType{numerics.F32}
}

// emptySpecs returns the empty cases of (op, dt), nil when it has none.
func emptySpecs(op string, dt numerics.DType) []Spec {
	d, ok := graph.Lookup(op)
	if !ok || graph.IsCollective(op) {
		return nil
	}
	found := false
	for _, e := range emptyDTypes(op) {
		found = found || e == dt
	}
	if !found {
		return nil
	}
	cases, ok := emptyCases[op]
	if !ok {
		switch d.Kind {
		case graph.KindUnary:
			cases = emptyUnary
		case graph.KindBinary:
			cases = emptyBinary
		default:
			return nil
		}
	}
	if op == "log_softmax" {
		cases = emptyCases["softmax"]
	}
	var ds []draft
	for _, c := range cases {
		tol, data := tolEmpty, emptyWithData[op+"/"+c.tag]
		if data {
			tol = tolBitwise
		}
		ds = append(ds, draft{tag: c.tag, tol: tol, empty: !data, dists: emptyDists(c), build: func(b *graph.Builder) *graph.Value {
			vs := make([]*graph.Value, len(c.ins))
			for i, x := range c.ins {
				t := dt
				if x.dt != 0 {
					t = x.dt
				}
				vs[i] = b.Input(x.name, t, x.shape...)
			}
			return b.Op(op, c.attrs.Clone(), vs...)
		}})
	}
	return finish(op, dt, ds...)
}

// emptyDists keeps the inputs that are not empty away from zero, so that a fill that scales
// them (scaled_matmul's scales) cannot hide behind a zero draw.
func emptyDists(c emptyCase) map[string]harness.Dist {
	m := map[string]harness.Dist{}
	for _, x := range c.ins {
		if x.dt == numerics.F32 {
			m[x.name] = distAwayZero
		}
	}
	return m
}

// tolEmpty is exact: an empty output is compared by its type alone (harness.ModeEmpty), and a
// non-empty one holds the value over nothing, which nothing was rounded to.
func tolEmpty(graph.Type) harness.Tolerance { return harness.Tolerance{} }

// emptyCollCases are the collectives over an empty buffer, on 2 and 4 ranks: every rank's
// output is empty (dtype and shape compared exactly on every rank), and max over an empty
// buffer is fine here, since no rank reduces over an empty axis, only elementwise across ranks.
var emptyCollCases = map[string][]collCase{
	"all_reduce": {
		{"empty-sum-0x3", meshW2, "dp", []int{0, 3}, red("sum")},
		{"empty-max-0", meshW4, "dp", []int{0}, red("max")},
	},
	"reduce_scatter": {{"empty-sum-0x3", meshW4, "dp", []int{0, 3}, red("sum")}},
	"all_gather":     {{"empty-0x3", meshW4, "dp", []int{0, 3}, nil}},
	"broadcast":      {{"empty-root1-0x5", meshW2, "dp", []int{0, 5}, graph.Attrs{"root": graph.Int(1)}}},
	"all_to_all":     {{"empty-0x8-split0", meshW4, "dp", []int{0, 8}, nil}},
}

// emptyDistSpecs returns the empty collective cases of (op, dt): f32 only.
func emptyDistSpecs(op string, dt numerics.DType) []Spec {
	if dt != numerics.F32 {
		return nil
	}
	var ds []draft
	for _, c := range emptyCollCases[op] {
		d := collDraft(op, dt, c, tolBitwise) // as every collective movement case; empty: by shape
		d.empty = true
		ds = append(ds, d)
	}
	return finish(op, dt, ds...)
}
