package golden

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Data movement copies through strided views in 1024-element blocks; the larger shapes hold
// more than one block (3*5*71 = 1065, 35*37 = 1295) so the last block is ragged. Outputs are
// compared bitwise: a copy has no rounding to excuse.
func init() {
	register(movementFamily, "transpose", "reshape", "slice", "concat")
}

// movementCase is one shape of a movement op: input shapes and attributes.
type movementCase struct {
	tag    string
	shapes [][]int
	attrs  graph.Attrs
}

var movementCases = map[string][]movementCase{
	"transpose": {
		{"1x1", [][]int{{1, 1}}, graph.Attrs{"perm": graph.Ints(1, 0)}},
		{"7x13", [][]int{{7, 13}}, graph.Attrs{"perm": graph.Ints(1, 0)}},
		{"3x5x71-perm201", [][]int{{3, 5, 71}}, graph.Attrs{"perm": graph.Ints(2, 0, 1)}},
	},
	"reshape": {
		{"1-to-1x1", [][]int{{1}}, graph.Attrs{"shape": graph.Ints(1, 1)}},
		{"7x13-to-13x7", [][]int{{7, 13}}, graph.Attrs{"shape": graph.Ints(13, 7)}},
		{"3x5x71-to-15x71", [][]int{{3, 5, 71}}, graph.Attrs{"shape": graph.Ints(-1, 71)}},
	},
	"slice": {
		{"1-all", [][]int{{1}}, graph.Attrs{"starts": graph.Ints(0), "ends": graph.Ints(1)}},
		{"7x13-to-5x11", [][]int{{7, 13}}, graph.Attrs{"starts": graph.Ints(1, 2), "ends": graph.Ints(6, 13)}},
		{"37x41-to-35x37", [][]int{{37, 41}}, graph.Attrs{"starts": graph.Ints(2, 3), "ends": graph.Ints(37, 40)}},
	},
	"concat": {
		{"1+2", [][]int{{1}, {2}}, graph.Attrs{"axis": graph.Int(0)}},
		{"7x13+7x5-axis1", [][]int{{7, 13}, {7, 5}}, graph.Attrs{"axis": graph.Int(1)}},
		{"5x211+3x211+2x211", [][]int{{5, 211}, {3, 211}, {2, 211}}, graph.Attrs{"axis": graph.Int(0)}},
	},
}

// inputNames are the names of a movement op's inputs, in order.
var inputNames = []string{"x0", "x1", "x2"}

func movementFamily(op string, dt numerics.DType) []Spec {
	d := distNormal
	if !dt.IsFloat() {
		d = harness.DefaultDist(dt)
	}
	var ds []draft
	for _, c := range movementCases[op] {
		m := map[string]harness.Dist{}
		for i := range c.shapes {
			m[inputNames[i]] = d
		}
		if op == "concat" && c.shapes[0][0] == 1 && dt.IsInt() {
			// Three small ints could coincide; opposite signs make the output vary.
			m["x0"], m["x1"] = harness.Dist{Kind: harness.DistInt, Lo: 1, Hi: 50}, harness.Dist{Kind: harness.DistInt, Lo: -50, Hi: -1}
		}
		ds = append(ds, draft{tag: c.tag, dists: m, tol: tolBitwise, build: func(b *graph.Builder) *graph.Value {
			ins := make([]*graph.Value, len(c.shapes))
			for i, s := range c.shapes {
				ins[i] = b.Input(inputNames[i], dt, s...)
			}
			return b.Op(op, c.attrs.Clone(), ins...)
		}})
	}
	return finish(op, dt, ds...)
}
