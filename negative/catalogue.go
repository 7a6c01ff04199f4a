package negative

import (
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Case is one invalid graph and how it must be refused.
type Case struct {
	// Rule names the rule the graph breaks, op/what ("slice/end-within-dim").
	Rule string
	// Op is the op whose rule it is ("" for rules of the graph as a whole); specs are labelled
	// with it so that the mutation check runs only the cases a fault's ops can touch.
	Op string
	// Hook is the file and function that holds the rule.
	Hook string
	// Stage is the first entry point that must refuse the graph.
	Stage Stage
	// Text is the graph text. At StageParse it is invalid: the parser, and the CLI's exec and
	// compile, must refuse it. At StageVerify it is valid, and Edit breaks the parsed graph in
	// a way no text can (a declared type, a shared name): Verify and Compile must refuse the
	// result. At StageCompile it is a valid graph that only the compiler refuses.
	Text string
	Edit func(g *graph.Graph)
	// Code is the stable error code (design.md §9) of the refusal.
	Code errs.Code
	// Names are substrings the one-line message must hold: the node, the op, the value.
	Names []string
}

// Stage is where a refusal must happen.
type Stage string

const (
	StageParse   Stage = "parse"   // graph.Parse, tessera-qa exec and compile
	StageVerify  Stage = "verify"  // graph.Verify, then compiler.Compile
	StageCompile Stage = "compile" // compiler.Compile, and tessera-qa compile
)

// Label is the spec label of the case: its op, or "graph".
func (c Case) Label() string {
	if c.Op == "" {
		return "graph"
	}
	return c.Op
}

// src renders the lines of a graph named neg, each indented as the printer does.
func src(lines ...string) string {
	var b strings.Builder
	b.WriteString("graph neg {\n")
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("}\n")
	return b.String()
}

const (
	opsGo   = "engine/graph/ops.go "
	regGo   = "engine/graph/registry.go InferNodeIn"
	collGo  = "engine/graph/ops_collective.go "
	gradGo  = "engine/graph/ops_grad.go "
	parseGo = "engine/graph/parse.go "
)

// node returns one text case whose graph has the given inputs and one node %y (then output).
func node(rule, op, hook string, code errs.Code, inputs []string, line string, names ...string) Case {
	lines := make([]string, 0, len(inputs)+2)
	for _, in := range inputs {
		lines = append(lines, "input "+in)
	}
	lines = append(lines, line, "output %y")
	if len(names) == 0 {
		names = []string{"%y", op}
	}
	return Case{Rule: rule, Op: op, Hook: hook, Stage: StageParse, Text: src(lines...), Code: code, Names: names}
}

var (
	x23  = []string{"%x: f32[2,3]"}
	x234 = []string{"%x: f32[2,3,4]"}
)

// textCases breaks each rule of the op registry and of the per-op shape rules once or more.
// Left out on purpose while other work changes them: reduce axes=[] (about to mean reduce
// every axis), dims on 0-d tensors (softmax, layernorm, collectives on a scalar), and size-0
// dims anywhere; the cases will be added once those rules settle.
var textCases = []Case{
	// The registry's declaration checks (registry.go InferNodeIn), every op alike.
	node("registry/unknown-op", "", parseGo+"node", errs.Unsupported, x23, "%y = frobnicate(%x)", "frobnicate"),
	node("registry/arity-too-few", "add", regGo, errs.Input, x23, "%y = add(%x)"),
	node("registry/arity-too-many", "relu", regGo, errs.Input, x23, "%y = relu(%x, %x)"),
	node("registry/unknown-attribute", "relu", regGo, errs.Input, x23, "%y = relu(%x) {alpha=0.5}", "%y", "relu", "alpha"),
	node("registry/attribute-kind", "softmax", regGo, errs.Input, x23, `%y = softmax(%x) {axis="last"}`, "%y", "softmax", "axis"),
	node("registry/attribute-value-listed", "gelu", regGo, errs.Input, x23, `%y = gelu(%x) {approx="fast"}`, "%y", "gelu", "fast"),
	node("registry/required-attribute", "transpose", regGo, errs.Input, x23, "%y = transpose(%x)", "%y", "transpose", "perm"),
	node("registry/input-dtype-accepted", "exp", regGo, errs.DType, []string{"%x: int32[2,3]"}, "%y = exp(%x)", "%y", "exp", "int32"),
	node("registry/inputs-share-dtype", "add", regGo, errs.DType, []string{"%x: f32[2,3]", "%z: f64[2,3]"}, "%y = add(%x, %z)", "%y", "add", "f64"),
	node("registry/collective-needs-mesh", "all_reduce", regGo, errs.Input, x23, `%y = all_reduce(%x) {axis="dp"}`, "%y", "all_reduce", "mesh"),
	node("registry/dtype-attribute-names-a-dtype", "cast", parseGo+"node", errs.DType, x23, "%y = cast(%x) {to=f7}", "f7"),

	// Elementwise.
	node("binary/broadcast", "add", opsGo+"Broadcast", errs.Shape, []string{"%x: f32[2,3]", "%z: f32[4,3]"}, "%y = add(%x, %z)", "%y", "add", "[2 3]"),
	node("binary/broadcast-trailing", "mul", opsGo+"Broadcast", errs.Shape, []string{"%x: f32[2,3]", "%z: f32[2]"}, "%y = mul(%x, %z)"),
	node("binary/broadcast-sub", "sub", opsGo+"Broadcast", errs.Shape, []string{"%x: f32[3,1]", "%z: f32[2,4]"}, "%y = sub(%x, %z)"),
	node("binary/broadcast-div", "div", opsGo+"Broadcast", errs.Shape, []string{"%x: f32[2,3,4]", "%z: f32[3,3,4]"}, "%y = div(%x, %z)"),
	node("binary/broadcast-maximum", "maximum", opsGo+"Broadcast", errs.Shape, []string{"%x: f32[5]", "%z: f32[4]"}, "%y = maximum(%x, %z)"),
	node("binary/dtype-minimum", "minimum", regGo, errs.DType, []string{"%x: f32[2]", "%z: int32[2]"}, "%y = minimum(%x, %z)"),
	node("div/float-only", "div", regGo, errs.DType, []string{"%x: int32[2]"}, "%y = div(%x, %x)", "%y", "div", "int32"),
	node("full_like/nan-needs-float", "full_like", gradGo+"fullLikeInfer", errs.Shape, []string{"%x: int32[2,3]"}, "%y = full_like(%x) {value=nan}"),

	// Reductions (axes=[] left out: see above).
	node("reduce/axis-range", "reduce_sum", opsGo+"ReduceAxes", errs.Shape, x23, "%y = reduce_sum(%x) {axes=[2]}", "%y", "reduce_sum", "axis"),
	node("reduce/axis-range-negative", "reduce_max", opsGo+"ReduceAxes", errs.Shape, x23, "%y = reduce_max(%x) {axes=[-3]}"),
	node("reduce/axis-repeated", "reduce_mean", opsGo+"ReduceAxes", errs.Shape, x23, "%y = reduce_mean(%x) {axes=[1,-1]}", "%y", "reduce_mean", "repeated"),
	node("reduce/accum-kind", "reduce_sum", regGo, errs.DType, x23, "%y = reduce_sum(%x) {accum=int32}", "%y", "reduce_sum", "accum"),
	node("reduce/accum-bool", "reduce_sum", regGo, errs.DType, []string{"%x: int32[2,3]"}, "%y = reduce_sum(%x) {accum=bool}"),

	// Rowwise (rank 0 left out: see above).
	node("softmax/axis-range", "softmax", opsGo+"axisInfer", errs.Shape, x23, "%y = softmax(%x) {axis=2}", "%y", "softmax", "axis 2"),
	node("softmax/axis-range-negative", "softmax", opsGo+"axisInfer", errs.Shape, x23, "%y = softmax(%x) {axis=-3}"),
	node("log_softmax/axis-range", "log_softmax", opsGo+"axisInfer", errs.Shape, x234, "%y = log_softmax(%x) {axis=3}"),
	node("softmax/axis-huge", "softmax", opsGo+"axisInfer", errs.Shape, x23, "%y = softmax(%x) {axis=9223372036854775807}"),
	node("softmax/accum-kind", "softmax", regGo, errs.DType, x23, "%y = softmax(%x) {accum=int8}", "%y", "softmax", "accum int8"),
	node("log_softmax/accum-kind", "log_softmax", regGo, errs.DType, x23, "%y = log_softmax(%x) {accum=bool}"),
	node("rmsnorm/accum-kind", "rmsnorm", regGo, errs.DType, []string{"%x: f32[2,3]", "%g: f32[3]"}, "%y = rmsnorm(%x, %g) {accum=int32}"),
	node("layernorm/gamma-shape", "layernorm", opsGo+"normInfer", errs.Shape, []string{"%x: f32[2,3]", "%g: f32[2]", "%b: f32[3]"}, "%y = layernorm(%x, %g, %b)", "%y", "layernorm", "[3]"),
	node("layernorm/beta-rank", "layernorm", opsGo+"normInfer", errs.Shape, []string{"%x: f32[2,3]", "%g: f32[3]", "%b: f32[1,3]"}, "%y = layernorm(%x, %g, %b)"),
	node("layernorm/eps-negative", "layernorm", opsGo+"normInfer", errs.Shape, []string{"%x: f32[2,3]", "%g: f32[3]", "%b: f32[3]"}, "%y = layernorm(%x, %g, %b) {eps=-1e-5}", "%y", "layernorm", "eps"),
	node("rmsnorm/eps-nan", "rmsnorm", opsGo+"normInfer", errs.Shape, []string{"%x: f32[2,3]", "%g: f32[3]"}, "%y = rmsnorm(%x, %g) {eps=nan}"),
	node("rmsnorm/gamma-shape", "rmsnorm", opsGo+"normInfer", errs.Shape, []string{"%x: f32[2,3]", "%g: f32[2]"}, "%y = rmsnorm(%x, %g)"),

	// Matmuls.
	node("matmul/inner-dims", "matmul", opsGo+"MatmulDims", errs.Shape, []string{"%a: f32[2,3]", "%b: f32[4,5]"}, "%y = matmul(%a, %b)", "%y", "matmul", "K=3"),
	node("matmul/inner-dims-transposed", "matmul", opsGo+"MatmulDims", errs.Shape, []string{"%a: f32[2,3]", "%b: f32[3,5]"}, "%y = matmul(%a, %b) {transpose_b=true}"),
	node("matmul/inner-dims-transpose-a", "matmul", opsGo+"MatmulDims", errs.Shape, []string{"%a: f32[2,3]", "%b: f32[3,5]"}, "%y = matmul(%a, %b) {transpose_a=true}"),
	node("matmul/rank", "matmul", opsGo+"matmulInfer", errs.Shape, []string{"%a: f32[2,2,3]", "%b: f32[2,3,5]"}, "%y = matmul(%a, %b)", "%y", "matmul", "rank-2"),
	node("batch_matmul/rank", "batch_matmul", opsGo+"matmulInfer", errs.Shape, []string{"%a: f32[2,3]", "%b: f32[3,5]"}, "%y = batch_matmul(%a, %b)"),
	node("batch_matmul/batch-dims", "batch_matmul", opsGo+"MatmulDims", errs.Shape, []string{"%a: f32[2,2,3]", "%b: f32[4,3,5]"}, "%y = batch_matmul(%a, %b)", "%y", "batch_matmul", "batch"),
	node("batch_matmul/inner-dims", "batch_matmul", opsGo+"MatmulDims", errs.Shape, []string{"%a: f32[2,2,3]", "%b: f32[2,4,5]"}, "%y = batch_matmul(%a, %b)"),
	node("matmul/tile-length", "matmul", opsGo+"matmulInfer", errs.Shape, []string{"%a: f32[2,3]", "%b: f32[3,5]"}, "%y = matmul(%a, %b) {tile=[16,16]}", "%y", "matmul", "tile"),
	node("matmul/tile-positive", "matmul", opsGo+"matmulInfer", errs.Shape, []string{"%a: f32[2,3]", "%b: f32[3,5]"}, "%y = matmul(%a, %b) {tile=[16,0,16]}"),
	node("matmul/accum-kind", "matmul", regGo, errs.DType, []string{"%a: int32[2,3]", "%b: int32[3,5]"}, "%y = matmul(%a, %b) {accum=f32}"),
	node("scaled_matmul/operand-dtype", "scaled_matmul", regGo, errs.DType, []string{"%a: f32[2,16]", "%b: f32[4,16]", "%sa: f32[]", "%sb: f32[]"}, "%y = scaled_matmul(%a, %b, %sa, %sb)"),
	node("scaled_matmul/rank", "scaled_matmul", opsGo+"scaledMatmulInfer", errs.Shape, []string{"%a: fp8e4m3[2,2,16]", "%b: fp8e4m3[4,16]", "%sa: f32[]", "%sb: f32[]"}, "%y = scaled_matmul(%a, %b, %sa, %sb)"),
	node("scaled_matmul/inner-dims", "scaled_matmul", opsGo+"scaledMatmulInfer", errs.Shape, []string{"%a: fp8e4m3[2,16]", "%b: fp8e4m3[4,32]", "%sa: f32[]", "%sb: f32[]"}, "%y = scaled_matmul(%a, %b, %sa, %sb)", "%y", "scaled_matmul", "K=16"),
	node("scaled_matmul/scale-scalar", "scaled_matmul", opsGo+"scaledMatmulInfer", errs.DType, []string{"%a: fp8e4m3[2,16]", "%b: fp8e4m3[4,16]", "%sa: f32[2]", "%sb: f32[]"}, "%y = scaled_matmul(%a, %b, %sa, %sb)", "%y", "scaled_matmul", "scale_a"),
	node("scaled_matmul/scale-dtype", "scaled_matmul", opsGo+"scaledMatmulInfer", errs.DType, []string{"%a: fp8e4m3[2,16]", "%b: fp8e4m3[4,16]", "%sa: f32[]", "%sb: f64[]"}, "%y = scaled_matmul(%a, %b, %sa, %sb)", "%y", "scaled_matmul", "scale_b"),
	node("scaled_matmul/out-dtype", "scaled_matmul", opsGo+"scaledMatmulInfer", errs.DType, []string{"%a: fp8e4m3[2,16]", "%b: fp8e4m3[4,16]", "%sa: f32[]", "%sb: f32[]"}, "%y = scaled_matmul(%a, %b, %sa, %sb) {out_dtype=int32}", "%y", "scaled_matmul", "out_dtype"),

	// Attention and its backward.
	node("attention/rank", "attention", opsGo+"attentionInfer", errs.Shape, []string{"%q: f32[4]"}, "%y = attention(%q, %q, %q)"),
	node("attention/ranks-differ", "attention", opsGo+"attentionInfer", errs.Shape, []string{"%q: f32[4,8]", "%k: f32[1,4,8]"}, "%y = attention(%q, %k, %k)"),
	node("attention/leading-dims", "attention", opsGo+"attentionInfer", errs.Shape, []string{"%q: f32[2,4,8]", "%k: f32[3,4,8]"}, "%y = attention(%q, %k, %k)", "%y", "attention", "leading"),
	node("attention/head-dims", "attention", opsGo+"attentionInfer", errs.Shape, []string{"%q: f32[4,8]", "%k: f32[4,6]", "%v: f32[4,8]"}, "%y = attention(%q, %k, %v)", "%y", "attention", "head dim"),
	node("attention/kv-length", "attention", opsGo+"attentionInfer", errs.Shape, []string{"%q: f32[4,8]", "%k: f32[5,8]", "%v: f32[4,8]"}, "%y = attention(%q, %k, %v)", "%y", "attention", "sequence"),
	node("attention/accum-kind", "attention", regGo, errs.DType, []string{"%q: f32[4,8]"}, "%y = attention(%q, %q, %q) {accum=int32}"),
	node("attention_lse/head-dims", "attention_lse", gradGo+"attentionLSEInfer", errs.Shape, []string{"%q: f32[4,8]", "%k: f32[4,6]"}, "%y = attention_lse(%q, %k)"),
	node("attention_grad/lse-type", "attention_grad", gradGo+"attentionGradInfer", errs.Shape, []string{"%q: f32[4,8]", "%l: f32[5]"}, `%y = attention_grad(%q, %q, %q, %q, %q, %l) {wrt="q"}`, "%y", "attention_grad", "lse"),
	node("attention_grad/do-type", "attention_grad", gradGo+"attentionGradInfer", errs.Shape, []string{"%q: f32[4,8]", "%o: f32[4,7]", "%l: f32[4]"}, `%y = attention_grad(%q, %q, %q, %o, %q, %l) {wrt="k"}`),

	// Data movement.
	node("transpose/perm-length", "transpose", opsGo+"transposeInfer", errs.Shape, x23, "%y = transpose(%x) {perm=[1,0,2]}", "%y", "transpose", "perm"),
	node("transpose/perm-range", "transpose", opsGo+"transposeInfer", errs.Shape, x23, "%y = transpose(%x) {perm=[2,0]}", "%y", "transpose", "permutation"),
	node("transpose/perm-negative", "transpose", opsGo+"transposeInfer", errs.Shape, x23, "%y = transpose(%x) {perm=[-1,0]}"),
	node("transpose/perm-repeated", "transpose", opsGo+"transposeInfer", errs.Shape, x23, "%y = transpose(%x) {perm=[0,0]}"),
	node("reshape/count", "reshape", opsGo+"reshapeInfer", errs.Shape, x23, "%y = reshape(%x) {shape=[4,2]}", "%y", "reshape", "[4 2]"),
	node("reshape/hole-divides", "reshape", opsGo+"reshapeInfer", errs.Shape, x23, "%y = reshape(%x) {shape=[4,-1]}"),
	node("reshape/two-holes", "reshape", opsGo+"reshapeInfer", errs.Shape, x23, "%y = reshape(%x) {shape=[-1,-1]}"),
	node("reshape/negative-dim", "reshape", opsGo+"reshapeInfer", errs.Shape, x23, "%y = reshape(%x) {shape=[-2,-3]}"),
	node("reshape/too-many-elements", "reshape", opsGo+"reshapeInfer", errs.Shape, x23, "%y = reshape(%x) {shape=[4611686018427387904,4]}", "%y", "reshape", "elements"),
	node("slice/length", "slice", opsGo+"sliceInfer", errs.Shape, x23, "%y = slice(%x) {starts=[0], ends=[1,1]}", "%y", "slice", "entries"),
	node("slice/end-within-dim", "slice", opsGo+"sliceInfer", errs.Shape, x23, "%y = slice(%x) {starts=[0,1], ends=[2,4]}", "%y", "slice", "axis 1"),
	node("slice/end-within-dim-first", "slice", opsGo+"sliceInfer", errs.Shape, x23, "%y = slice(%x) {starts=[1,0], ends=[3,3]}", "%y", "slice", "axis 0"),
	node("slice/start-negative", "slice", opsGo+"sliceInfer", errs.Shape, x23, "%y = slice(%x) {starts=[-1,0], ends=[2,3]}"),
	node("slice/start-after-end", "slice", opsGo+"sliceInfer", errs.Shape, x23, "%y = slice(%x) {starts=[0,2], ends=[2,1]}"),
	node("concat/axis-range", "concat", opsGo+"concatInfer", errs.Shape, x23, "%y = concat(%x, %x) {axis=2}", "%y", "concat", "axis 2"),
	node("concat/rank", "concat", opsGo+"concatInfer", errs.Shape, []string{"%x: f32[2,3]", "%z: f32[2,3,1]"}, "%y = concat(%x, %z) {axis=0}", "%y", "concat", "rank"),
	node("concat/other-dims", "concat", opsGo+"concatInfer", errs.Shape, []string{"%x: f32[2,3]", "%z: f32[2,4]"}, "%y = concat(%x, %z) {axis=0}", "%y", "concat", "dim 1"),
	node("mse_loss/shapes", "mse_loss", opsGo+"mse_loss", errs.Shape, []string{"%x: f32[2,3]", "%z: f32[3,2]"}, "%y = mse_loss(%x, %z)"),

	// Collectives, over a mesh (the 0-d cases are left out: see above).
	meshed("all_reduce/axis-exists", "all_reduce", collGo+"collAxis", "%y = all_reduce(%x) {axis=\"pp\"}", "pp"),
	meshed("all_reduce/avg-needs-float", "all_reduce", collGo+"checkRedOp", "%y = all_reduce(%i) {axis=\"dp\", op=\"avg\"}", "avg"),
	meshed("all_gather/dim-range", "all_gather", collGo+"collDim", "%y = all_gather(%x) {axis=\"dp\", dim=2}", "dim 2"),
	meshed("reduce_scatter/divisible", "reduce_scatter", collGo+"resized", "%y = reduce_scatter(%x) {axis=\"dp\", dim=1}", "divisible"),
	meshed("broadcast/root-range", "broadcast", collGo+"broadcastCollInfer", "%y = broadcast(%x) {axis=\"dp\", root=2}", "root 2"),
	meshed("all_to_all/split-dim-range", "all_to_all", collGo+"collDim", "%y = all_to_all(%x) {axis=\"dp\", split_dim=-3, concat_dim=0}", "split_dim"),
	meshed("send/stage-range", "send", collGo+"checkStages", "%y = send(%x) {axis=\"dp\", src=0, dst=2}", "dst 2"),
	meshed("send/not-to-itself", "send", collGo+"checkStages", "%y = send(%x) {axis=\"dp\", src=1, dst=1}", "itself"),
	meshed("recv/rank-bound", "recv", collGo+"recvInfer", "%y = recv() {axis=\"dp\", src=0, dst=1, dtype=f32, shape=[1,1,1,1,1,1,1,1,1]}", "rank"),
	meshed("chunk/dim-range", "chunk", collGo+"collDim", "%y = chunk(%x) {axis=\"dp\", dim=5}", "dim 5"),

	// Types written in the text (engine/graph/verify.go CheckType through the parser).
	{Rule: "type/rank-bound", Hook: "engine/graph/verify.go CheckType", Stage: StageParse, Code: errs.Shape, Names: []string{"rank exceeds 8"},
		Text: src("input %x: f32[1,1,1,1,1,1,1,1,1]", "%y = relu(%x)", "output %y")},
	{Rule: "type/element-bound", Hook: "engine/graph/verify.go CheckType", Stage: StageParse, Code: errs.Shape, Names: []string{"elements"},
		Text: src("input %x: f32[65536,65536]", "%y = relu(%x)", "output %y")},
	{Rule: "type/written-type-agrees", Op: "relu", Hook: parseGo + "node", Stage: StageParse, Code: errs.Shape, Names: []string{"%y", "relu", "f32[3,2]"},
		Text: src("input %x: f32[2,3]", "%y: f32[3,2] = relu(%x)", "output %y")},
	// The parser's own structural rules (the syntax itself is FuzzParse's and parse_test's).
	{Rule: "parse/value-defined-once", Op: "relu", Hook: parseGo + "fresh", Stage: StageParse, Code: errs.Parse, Names: []string{"%x", "already defined"},
		Text: src("input %x: f32[2,3]", "%x = relu(%x)", "output %x")},
	{Rule: "parse/defined-before-use", Op: "relu", Hook: parseGo + "use", Stage: StageParse, Code: errs.Parse, Names: []string{"%h", "not defined"},
		Text: src("input %x: f32[2,3]", "%y = relu(%h)", "%h = relu(%x)", "output %y")},
	{Rule: "parse/has-outputs", Hook: parseGo + "finish", Stage: StageParse, Code: errs.Parse, Names: []string{"neg", "no output"},
		Text: src("input %x: f32[2,3]", "%y = relu(%x)")},
	{Rule: "parse/node-limit", Hook: parseGo + "node", Stage: StageParse, Code: errs.Input, Names: []string{"neg", "65536 nodes"},
		Text: src(append(append([]string{"input %x: f32[1]"}, manyNodes(graph.MaxNodes+1)...), "output %x")...)},
	{Rule: "type/written-dtype-agrees", Op: "relu", Hook: parseGo + "node", Stage: StageParse, Code: errs.DType, Names: []string{"%y", "relu", "f64"},
		Text: src("input %x: f32[2,3]", "%y: f64[2,3] = relu(%x)", "output %y")},
}

// meshed is a node case over mesh dp=2,tp=3 with inputs %x f32[2,3] and %i int32[2,3].
func meshed(rule, op, hook, line string, detail string) Case {
	return Case{Rule: rule, Op: op, Hook: hook, Stage: StageParse, Code: errs.Shape, Names: []string{"%y", op, detail},
		Text: src("mesh dp=2,tp=3", "input %x: f32[2,3]", "input %i: int32[2,3]", line, "output %y")}
}

// Cases returns the whole catalogue: the text cases, then the graph edits.
func Cases() []Case {
	out := append([]Case{}, textCases...)
	out = append(out, spectralCases...) // catalogue_spectral.go
	out = append(out, convCases...)     // catalogue_conv.go
	return append(out, editCases()...)
}

// manyNodes returns n relu lines %n0 .. %n(n-1), each reading %x.
func manyNodes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "%n" + strconv.Itoa(i) + " = relu(%x)"
	}
	return out
}
