package negative

import (
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// chain is the valid graph the verify cases edit: two nodes, so that order and names can be
// broken between them.
var chain = src("input %x: f32[2,3]", "%h: f32[2,3] = relu(%x)", "%y: f32[3,2] = transpose(%h) {perm=[1,0]}", "output %y")

const verifyGo = "engine/graph/verify.go Verify"

// A rule about a value is labelled with the op that reads it (relu), so that the mutation
// check, which runs a fault's ops only, runs it.

// editCases break the rules of graph.Verify that the text format cannot express (it names
// every value once, in order, with a type the parser infers), as a Go program building a
// graph can; then the compiler-side rules.
func editCases() []Case {
	verify := func(rule, op string, code errs.Code, edit func(g *graph.Graph), names ...string) Case {
		return Case{Rule: rule, Op: op, Hook: verifyGo, Stage: StageVerify, Text: chain, Edit: edit, Code: code, Names: names}
	}
	return []Case{
		verify("verify/graph-name", "", errs.Input, func(g *graph.Graph) { g.Name = "9 lives" }, "9 lives"),
		verify("verify/node-limit", "", errs.Input, func(g *graph.Graph) {
			for len(g.Nodes) <= graph.MaxNodes {
				g.Nodes = append(g.Nodes, g.Nodes[0])
			}
		}, "limit"),
		verify("verify/value-not-nil", "relu", errs.Input, func(g *graph.Graph) { g.Nodes[0].Output = nil }, "relu", "nil value"),
		verify("verify/value-name", "relu", errs.Input, func(g *graph.Graph) { g.Nodes[0].Output.Name = "h h" }, "h h"),
		verify("verify/value-defined-once", "transpose", errs.Input, func(g *graph.Graph) { g.Nodes[1].Output.Name = "h" }, "%h", "twice"),
		verify("verify/input-defined-once", "", errs.Input, func(g *graph.Graph) { g.Nodes[0].Output.Name = "x" }, "%x", "twice"),
		verify("verify/defined-before-use", "relu", errs.Input, func(g *graph.Graph) {
			g.Nodes[0], g.Nodes[1] = g.Nodes[1], g.Nodes[0]
		}, "%y", "%h", "before use"),
		verify("verify/input-in-graph", "transpose", errs.Input, func(g *graph.Graph) {
			g.Nodes[1].Inputs[0] = &graph.Value{Name: "stray", Type: g.Nodes[0].Output.Type}
		}, "%y", "%stray"),
		verify("verify/declared-type", "transpose", errs.Shape, func(g *graph.Graph) {
			g.Nodes[1].Output.Type.Shape = []int{2, 3}
		}, "%y", "transpose", "f32[3,2]", "f32[2,3]"),
		verify("verify/declared-dtype", "relu", errs.Shape, func(g *graph.Graph) {
			g.Nodes[0].Output.Type.DType = numerics.F64
		}, "%h", "relu", "f64"),
		verify("verify/value-dtype-valid", "relu", errs.DType, func(g *graph.Graph) { g.Inputs[0].Type.DType = numerics.DType(200) }, "%x", "dtype"),
		verify("verify/value-rank-bound", "relu", errs.Shape, func(g *graph.Graph) {
			g.Inputs[0].Type.Shape = []int{1, 1, 1, 1, 1, 1, 1, 1, 1}
		}, "%x", "rank 9 exceeds"),
		verify("verify/value-element-bound", "relu", errs.Shape, func(g *graph.Graph) {
			g.Inputs[0].Type.Shape = []int{3074457345618258603, 3} // the product wraps to 1 in an int64
		}, "%x", "elements"),
		verify("verify/op-registered", "relu", errs.Unsupported, func(g *graph.Graph) { g.Nodes[0].Op = "frobnicate" }, "%h", "frobnicate"),
		verify("verify/op-rules", "transpose", errs.Shape, func(g *graph.Graph) {
			g.Nodes[1].Attrs["perm"] = graph.Ints(0, 2)
		}, "%y", "transpose", "permutation"),
		verify("verify/has-outputs", "", errs.Input, func(g *graph.Graph) { g.Outputs = nil }, "neg", "no outputs"),
		verify("verify/output-defined", "", errs.Input, func(g *graph.Graph) {
			g.Outputs = []*graph.Value{{Name: "y", Type: g.Outputs[0].Type}}
		}, "neg", "output 0"),
		{Rule: "compile/collective-needs-compile-dist", Op: "all_reduce", Hook: "engine/compiler/compile.go Compile", Stage: StageCompile,
			Code: errs.Input, Names: []string{"%y", "all_reduce", "CompileDist"},
			Text: src("mesh dp=2", "input %x: f32[2,3]", `%y = all_reduce(%x) {axis="dp"}`, "output %y")},
	}
}
