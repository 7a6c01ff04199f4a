package golden

import (
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Multi-rank golden cases: every collective op (graph.CollectiveOps) times every float and int
// dtype it accepts, on small meshes: two and four ranks along one axis (dp=2, dp=4) and one
// dp=2,tp=2 case whose group is an axis other than the whole world. A case's graph is every
// rank's program (SPMD, with a mesh line); rank r's inputs are drawn from SubSeed(seed,
// "rank<r>"), so every rank holds different data; the expected outputs are ref.RunDist's.
//
// Tolerances: data movement (all_gather, broadcast, all_to_all, chunk, send/recv) is bitwise;
// max and min are bitwise too (the result is one of the inputs, and engine/dist orders -0 < +0
// and canonicalises NaN like the golden model); integer reductions are exact; float sum and avg
// over an axis of n ranks take ForReduction(n), the rule for a sum of n terms (engine/dist adds
// the n contributions in rank order in f32 for f32 and narrower floats, the golden model in
// float64 with one rounding). Bool is left out: only the data-movement ops accept it, and the
// golden model moves its bytes like any other dtype's.

// distFamilies maps each collective op to its spec builder (DistCatalogue).
var distFamilies = map[string]family{}

func registerDist(f family, ops ...string) {
	for _, op := range ops {
		if _, dup := distFamilies[op]; dup {
			panic("golden: collective family registered twice: " + op)
		}
		distFamilies[op] = f
	}
}

func init() {
	registerDist(reduceCollFamily, "all_reduce", "reduce_scatter")
	registerDist(moveCollFamily, "all_gather", "broadcast", "all_to_all", "chunk")
	registerDist(sendFamily, "send")
	registerDist(recvFamily, "recv")
}

// distDTypes are the dtypes the multi-rank catalogue covers for an op: its float and int ones.
func distDTypes(def *graph.OpDef) []numerics.DType {
	return slices.DeleteFunc(slices.Clone(def.DTypes), func(dt numerics.DType) bool { return !dt.IsFloat() && !dt.IsInt() })
}

// DistCatalogue returns every multi-rank golden spec, ordered by op (graph.CollectiveOps), then
// dtype (registry order), then the order the op's family lists them. Catalogue() holds the
// single-device specs only, so the suites that loop over it (differential, determinism, the
// PTX tests) never meet a mesh graph; Update and Verify cover both.
func DistCatalogue() []Spec {
	var out []Spec
	for _, def := range graph.CollectiveOps() {
		f, ok := distFamilies[def.Name]
		if !ok {
			continue
		}
		for _, dt := range distDTypes(def) {
			out = append(out, f(def.Name, dt)...)
			out = append(out, emptyDistSpecs(def.Name, dt)...) // catalogue_empty.go
		}
	}
	return out
}

// DistPairs returns the (collective op, float or int dtype) pairs of the op registry as
// FileName paths, sorted: the files DistCatalogue must produce.
func DistPairs() []string {
	var out []string
	for _, def := range graph.CollectiveOps() {
		for _, dt := range distDTypes(def) {
			out = append(out, FileName(def.Name, dt))
		}
	}
	slices.Sort(out)
	return out
}

// World is the number of ranks the spec runs on: its mesh's world size, 0 for a
// single-device spec (no mesh).
func (s Spec) World() int {
	if s.Graph == nil || s.Graph.Mesh == nil {
		return 0
	}
	return s.Graph.Mesh.World()
}

// RankSeed is the seed rank r's inputs of a multi-rank spec are drawn from.
func RankSeed(seed uint64, r int) uint64 { return harness.SubSeed(seed, fmt.Sprintf("rank%d", r)) }

// RankInputs draws every rank's inputs of a multi-rank spec: rank r's are
// harness.RandomInputs with RankSeed(Seed, r) and the spec's dists.
func (s Spec) RankInputs() ([]map[string]*tensor.Tensor, error) {
	n := s.World()
	if n == 0 {
		return nil, errs.New(errs.Input, "golden: spec %s runs on one device (no mesh); use Inputs", s.Name)
	}
	out := make([]map[string]*tensor.Tensor, n)
	for r := range out {
		in, err := harness.RandomInputs(s.Graph, RankSeed(s.Seed, r), s.Dists)
		if err != nil {
			return nil, errs.Wrap(errs.Input, err, "rank %d", r)
		}
		out[r] = in
	}
	return out, nil
}

// The meshes the multi-rank catalogue uses; a tag starts with its mesh's short name.
const (
	meshW2   = "dp=2"
	meshW4   = "dp=4"
	meshDPTP = "dp=2,tp=2"
)

func meshTag(m string) string {
	switch m {
	case meshW2:
		return "w2"
	case meshW4:
		return "w4"
	}
	return "dp2xtp2"
}

// collCase is one multi-rank case of a single collective node: mesh, axis, the per-rank input
// shape and the node's attributes besides the axis.
type collCase struct {
	tag   string // after the mesh tag
	mesh  string
	axis  string
	shape []int
	attrs graph.Attrs
}

func (c collCase) name() string { return meshTag(c.mesh) + "-" + c.tag }

// axisSize is the size of the case's group.
func (c collCase) axisSize() int {
	m, err := mesh.ParseMesh(c.mesh)
	if err != nil {
		panic("golden: catalogue mesh " + c.mesh + ": " + err.Error())
	}
	return m.Size(c.axis)
}

func red(op string) graph.Attrs { return graph.Attrs{"op": graph.String(op)} }

func withAttrs(a graph.Attrs, kv ...any) graph.Attrs {
	a = a.Clone()
	if a == nil {
		a = graph.Attrs{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		a[kv[i].(string)] = kv[i+1].(graph.Attr)
	}
	return a
}

// Reductions: counts that the ranks cannot split evenly (7x3 = 21 over 2 and 4 ranks, 13, 11)
// so engine/dist's reduce-scatter chunks are ragged; every reduction on the whole world and on
// one axis of the 2x2 mesh; avg for floats only (the registry refuses it for ints).
var reduceCollCases = map[string][]collCase{
	"all_reduce": {
		{"sum-7x3", meshW2, "dp", []int{7, 3}, red("sum")},
		{"sum-13", meshW4, "dp", []int{13}, red("sum")},
		{"max-5x3", meshW4, "dp", []int{5, 3}, red("max")},
		{"min-2x3", meshW2, "dp", []int{2, 3}, red("min")},
		{"avg-11", meshW4, "dp", []int{11}, red("avg")},
		{"sum-dp-3x5", meshDPTP, "dp", []int{3, 5}, red("sum")},
		{"max-tp-4", meshDPTP, "tp", []int{4}, red("max")},
	},
	"reduce_scatter": {
		{"sum-8x3", meshW2, "dp", []int{8, 3}, red("sum")},
		{"sum-3x8-dim1", meshW4, "dp", []int{3, 8}, withAttrs(red("sum"), "dim", graph.Int(1))},
		{"max-12", meshW4, "dp", []int{12}, red("max")},
		{"min-6x2", meshW2, "dp", []int{6, 2}, red("min")},
		{"avg-10", meshW2, "dp", []int{10}, red("avg")},
		{"sum-tp-4x3", meshDPTP, "tp", []int{4, 3}, red("sum")},
	},
}

func reduceCollFamily(op string, dt numerics.DType) []Spec {
	var ds []draft
	for _, c := range reduceCollCases[op] {
		how := c.attrs["op"].Str
		if how == "avg" && !dt.IsFloat() {
			continue
		}
		tol := tolBitwise // max, min: one of the inputs
		switch {
		case !dt.IsFloat():
			tol = tolDefault // ints: exact
		case how == "sum" || how == "avg":
			tol = tolReduce(c.axisSize())
		}
		ds = append(ds, collDraft(op, dt, c, tol))
	}
	return finish(op, dt, ds...)
}

// Data movement: bitwise. all_gather and all_to_all on both dims and a negative dim, broadcast
// from a root other than 0, chunk (the local cut, no communication) on each dim.
var moveCollCases = map[string][]collCase{
	"all_gather": {
		{"7x3", meshW2, "dp", []int{7, 3}, nil},
		{"2x3-dim1", meshW4, "dp", []int{2, 3}, graph.Attrs{"dim": graph.Int(1)}},
		{"5", meshW4, "dp", []int{5}, nil},
		{"tp-3x2-dim-1", meshDPTP, "tp", []int{3, 2}, graph.Attrs{"dim": graph.Int(-1)}},
	},
	"broadcast": {
		{"root1-7x3", meshW2, "dp", []int{7, 3}, graph.Attrs{"root": graph.Int(1)}},
		{"root2-13", meshW4, "dp", []int{13}, graph.Attrs{"root": graph.Int(2)}},
		{"root0-3", meshW4, "dp", []int{3}, nil},
		{"dp-root1-3x5", meshDPTP, "dp", []int{3, 5}, graph.Attrs{"root": graph.Int(1)}},
	},
	"all_to_all": {
		{"4x3-split0-concat1", meshW2, "dp", []int{4, 3}, graph.Attrs{"split_dim": graph.Int(0), "concat_dim": graph.Int(1)}},
		{"3x8-split1-concat0", meshW4, "dp", []int{3, 8}, graph.Attrs{"split_dim": graph.Int(1), "concat_dim": graph.Int(0)}},
		{"8x5", meshW4, "dp", []int{8, 5}, nil},
		{"tp-2x4-split-1-concat-1", meshDPTP, "tp", []int{2, 4}, graph.Attrs{"split_dim": graph.Int(-1), "concat_dim": graph.Int(-1)}},
	},
	"chunk": {
		{"6x3", meshW2, "dp", []int{6, 3}, nil},
		{"3x8-dim1", meshW4, "dp", []int{3, 8}, graph.Attrs{"dim": graph.Int(1)}},
		{"dp-4x2-dim-2", meshDPTP, "dp", []int{4, 2}, graph.Attrs{"dim": graph.Int(-2)}},
	},
}

func moveCollFamily(op string, dt numerics.DType) []Spec {
	var ds []draft
	for _, c := range moveCollCases[op] {
		ds = append(ds, collDraft(op, dt, c, tolBitwise))
	}
	return finish(op, dt, ds...)
}

// collDist is the input distribution of every multi-rank case: standard normal for floats (it
// fits fp8, and sums of four stay far from any overflow); ints in [-100, 100], wide enough
// that the max of four ranks still varies and that int8 sums wrap in places (both sides wrap).
func collDist(dt numerics.DType) harness.Dist {
	if dt.IsFloat() {
		return distNormal
	}
	return distCollInt
}

var distCollInt = harness.Dist{Kind: harness.DistInt, Lo: -100, Hi: 100}

// collDraft is the draft of one collective node over input %x.
func collDraft(op string, dt numerics.DType, c collCase, tol tolRule) draft {
	return draft{tag: c.name(), mesh: c.mesh, dists: dists("x", collDist(dt)), tol: tol, build: func(b *graph.Builder) *graph.Value {
		x := b.Input("x", dt, c.shape...)
		return b.Op(op, withAttrs(c.attrs, "axis", graph.String(c.axis)), x)
	}}
}

// p2pCase is a send/recv case: the stage pairs (src, dst) on the axis, in program order.
type p2pCase struct {
	tag   string
	mesh  string
	axis  string
	shape []int
	pairs [][2]int
}

// send: one message from src to dst. Output concat(recv, send's output) along dim 0: the
// receiver's first half is the sender's input, everyone else's is zeros; the second half is
// the rank's own input (send passes it through), so no rank's output is constant.
var sendCases = []p2pCase{
	{"0to1-7x3", meshW2, "dp", []int{7, 3}, [][2]int{{0, 1}}},
	{"3to1-5", meshW4, "dp", []int{5}, [][2]int{{3, 1}}},
	{"tp-1to0-3x2", meshDPTP, "tp", []int{3, 2}, [][2]int{{1, 0}}},
}

// recv: a ring (stage c sends to c+1, the last to 0; each recv's channel is its own) and two
// messages on one channel (the k-th recv gets the k-th send). Output: every recv and the input,
// concatenated along dim 0.
var recvCases = []p2pCase{
	{"ring-7x3", meshW2, "dp", []int{7, 3}, [][2]int{{0, 1}, {1, 0}}},
	{"ring-5", meshW4, "dp", []int{5}, [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 0}}},
	{"dp-ring-3x2", meshDPTP, "dp", []int{3, 2}, [][2]int{{0, 1}, {1, 0}}},
	{"fifo-4x3", meshW2, "dp", []int{4, 3}, [][2]int{{0, 1}, {0, 1}}},
}

func sendFamily(op string, dt numerics.DType) []Spec { return p2pFamily(op, dt, sendCases) }
func recvFamily(op string, dt numerics.DType) []Spec { return p2pFamily(op, dt, recvCases) }

func p2pFamily(op string, dt numerics.DType, cases []p2pCase) []Spec {
	var ds []draft
	for _, c := range cases {
		ds = append(ds, draft{tag: meshTag(c.mesh) + "-" + c.tag, mesh: c.mesh, dists: dists("x", collDist(dt)), tol: tolBitwise,
			build: func(b *graph.Builder) *graph.Value {
				x := b.Input("x", dt, c.shape...)
				shape := make([]int64, len(c.shape))
				for i, d := range c.shape {
					shape[i] = int64(d)
				}
				var parts []*graph.Value
				var sent *graph.Value
				for i, p := range c.pairs {
					msg := x
					if i > 0 && p == c.pairs[i-1] {
						msg = b.Op("neg", nil, x) // a second message on one channel must differ from the first
					}
					at := graph.Attrs{"axis": graph.String(c.axis), "src": graph.Int(int64(p[0])), "dst": graph.Int(int64(p[1]))}
					sent = b.Op("send", at, msg)
					parts = append(parts, b.Op("recv", withAttrs(at, "dtype", graph.DTypeAttr(dt), "shape", graph.Ints(shape...))))
				}
				if op == "send" {
					parts = append(parts, sent)
				} else {
					parts = append(parts, x)
				}
				return b.Op("concat", graph.Attrs{"axis": graph.Int(0)}, parts...)
			}})
	}
	return finish(op, dt, ds...)
}
