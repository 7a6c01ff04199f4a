package property

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Config bounds the graphs Build makes.
type Config struct {
	MaxOps   int // steps per graph: 1..MaxOps
	MaxElems int // elements per tensor
	MaxWork  int // multiply-adds of one matmul or attention node
	// Special draws every fresh float input from ClassSpecial or ClassLogits and turns the
	// magnitude guard off (Tolerance.NoGuard): the NaN/Inf propagation property.
	Special bool
	// Runs, when set, says which ops the backend under test can run (the cuda backend:
	// ptx.Lowers); the generator draws only those. Nil: every op.
	Runs func(*graph.OpDef) bool
	// edges numbers the draws of one Check for the edge schedule (edges.go); nil outside Check.
	edges *edgeCursor
}

// DefaultConfig is what the suite uses: 1 to 12 ops over the whole registry.
func DefaultConfig() Config { return Config{MaxOps: 12, MaxElems: 1 << 14, MaxWork: 1 << 19} }

// SmallConfig is the throughput target's graph: at most 6 ops and 64K elements per tensor.
func SmallConfig() Config { return Config{MaxOps: 6, MaxElems: 1 << 16, MaxWork: 1 << 19} }

// Case is a built random graph with its inputs, golden-model outputs and tolerances.
type Case struct {
	Spec    Spec
	Graph   *graph.Graph
	Inputs  map[string]*tensor.Tensor
	Classes map[string]Class // value class of each float input
	// Want holds the golden model's outputs, K the longest reduction (terms summed into one
	// element) upstream of each output, Tolerances what Tolerance gives for them.
	Want       []*tensor.Tensor
	K          []int
	Tolerances []harness.Tolerance
}

// Ops is the sequence of op names, in node order ("matmul+relu").
func (c *Case) Ops() string {
	names := make([]string, len(c.Graph.Nodes))
	for i, n := range c.Graph.Nodes {
		names[i] = n.Op
	}
	return strings.Join(names, "+")
}

// Harness returns the case as a harness.Case for the Runner and replay manifests.
func (c *Case) Harness(suite, name string, seed uint64) harness.Case {
	return harness.Case{Suite: suite, Name: name, Graph: c.Graph, Inputs: c.Inputs, Seed: seed,
		Tolerances: slices.Clone(c.Tolerances), Labels: []string{"property", c.Spec.Storage.String()}}
}

// opTable is the registry in a fixed order (by name): Step.Op indexes it.
func opTable() []*graph.OpDef { return graph.Ops() }

// Build interprets spec as a graph: step by step, each op's template picks operands among the
// values built so far or makes fresh inputs, and the golden model evaluates every node as it
// is added (templates use the values, e.g. to derive near-cancelling operands). The graph's
// outputs are the values nothing reads. Build is a pure function of (spec, cfg). An error
// means a generator bug (a template made an invalid node), never bad luck.
func Build(spec Spec, cfg Config) (*Case, error) {
	b := &builder{cfg: cfg, spec: spec, g: &graph.Graph{Name: "prop"},
		vals: map[*graph.Value]*tensor.Tensor{}, k: map[*graph.Value]int{},
		classes: map[string]Class{}, read: map[*graph.Value]bool{}}
	ops := opTable()
	if cfg.Runs != nil {
		ops = slices.DeleteFunc(slices.Clone(ops), func(d *graph.OpDef) bool { return !cfg.Runs(d) })
	}
	for i, s := range spec.Steps {
		b.s, b.stepInputs, b.stepsLeft = s, 0, len(spec.Steps)-i-1
		d := ops[s.Op%len(ops)]
		if err := b.apply(d); err != nil {
			return nil, errs.Wrap(errs.Internal, err, "prop: step %d (%s) after %d nodes", i, d.Name, len(b.g.Nodes))
		}
	}
	c := &Case{Spec: spec, Graph: b.g, Inputs: map[string]*tensor.Tensor{}, Classes: b.classes}
	for _, v := range b.g.Inputs {
		c.Inputs[v.Name] = b.vals[v]
	}
	for _, n := range b.g.Nodes {
		if !b.read[n.Output] {
			b.g.Outputs = append(b.g.Outputs, n.Output)
			c.Want = append(c.Want, b.vals[n.Output])
			c.K = append(c.K, b.k[n.Output])
		}
	}
	if err := graph.Verify(b.g); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "prop: built graph does not verify")
	}
	for i, v := range b.g.Outputs {
		t := Tolerance(v.Type.DType, c.K[i], c.Want[i])
		if cfg.Special {
			// The values are chosen to produce NaN and Inf; an output that is all NaN is
			// the point, not a degenerate reference, and its NaN positions are still checked.
			t = t.NoGuard()
		}
		c.Tolerances = append(c.Tolerances, t)
	}
	return c, nil
}

// builder is the state of one Build.
type builder struct {
	cfg  Config
	spec Spec
	s    Step // the step being applied
	// stepInputs counts the fresh inputs the current step made.
	stepInputs int
	// stepsLeft counts the steps after the current one: each adds at least one node, and the
	// graph holds at most MaxOps.
	stepsLeft int
	g         *graph.Graph
	vals      map[*graph.Value]*tensor.Tensor
	k         map[*graph.Value]int
	classes   map[string]Class
	read      map[*graph.Value]bool
	op        *graph.OpDef // the op the current step applies (empty.go)
}

// dimPool holds the dims shapes are made of: 1, primes, powers of two and their neighbours,
// and values just past the default tiles (matmul 64/64/32, reduce 16x256, rowwise 8x256,
// elementwise blocks of 1024 elements), so edge tiles are sometimes full and mostly masked.
var dimPool = []int{1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33, 63, 64, 65, 127, 257}

func (b *builder) dim(i int) int { return dimPool[b.s.Dims[i%len(b.s.Dims)]%len(dimPool)] }

// shape makes a shape of the given rank from the step's dims, halved (largest first) until
// it fits MaxElems. Halving d to (d+1)/2 keeps odd dims odd: 257 -> 129 -> 65 -> 33.
func (b *builder) shape(rank int) []int {
	s := make([]int, rank)
	for i := range s {
		s[i] = b.dim(i)
	}
	return b.fit(s)
}

func (b *builder) fit(s []int) []int {
	for tensor.NumElems(s) > b.cfg.MaxElems {
		i := 0
		for j := range s {
			if s[j] > s[i] {
				i = j
			}
		}
		s[i] = (s[i] + 1) / 2
	}
	return s
}

// dtypePref orders dtypes for index draws: what shrinking reaches first comes first.
var dtypePref = []numerics.DType{numerics.F32, numerics.F64, numerics.F16, numerics.BF16, numerics.I32,
	numerics.I8, numerics.F8E4M3, numerics.F8E5M2, numerics.Bool}

// dtype picks the dtype of a fresh input for op d: the storage dtype when d takes it and the
// step does not ask for another, else one of d's dtypes.
func (b *builder) dtype(d *graph.OpDef) numerics.DType {
	if b.s.DType == 0 && d.Supports(b.spec.Storage) {
		return b.spec.Storage
	}
	var ok []numerics.DType
	for _, dt := range dtypePref {
		if d.Supports(dt) {
			ok = append(ok, dt)
		}
	}
	return ok[b.s.DType%len(ok)]
}

// AccumChoices lists the accumulators an op with inputs of dtype dt may name: those the
// numerics policy accepts for dt (they hold every dt value exactly), widest first. An
// accumulator narrower than the storage would be outside what the tolerance policy covers.
func AccumChoices(dt numerics.DType) []numerics.DType {
	var out []numerics.DType
	for _, a := range numerics.All {
		if (numerics.Policy{Storage: dt, Accum: a, Output: dt, Rounding: numerics.RoundNearestEven}).Validate() == nil {
			out = append(out, a)
		}
	}
	return out
}

// accum sets the step's accum attribute on attrs for inputs of dtype dt, if it asks for one.
func (b *builder) accum(attrs graph.Attrs, dt numerics.DType) graph.Attrs {
	if b.s.Accum < 5 {
		return attrs
	}
	ch := AccumChoices(dt)
	if len(ch) == 0 {
		return attrs
	}
	if attrs == nil {
		attrs = graph.Attrs{}
	}
	attrs["accum"] = graph.DTypeAttr(ch[(b.s.Accum-5)%len(ch)])
	return attrs
}

// class is the value class of a fresh float input of this step.
func (b *builder) class() Class {
	c := Class(b.s.Class) % numClasses
	if b.cfg.Special {
		c = ClassSpecial
		if b.s.Class%3 == 2 {
			c = ClassLogits
		}
	}
	return c
}

// input adds a fresh graph input with values of class c. Its values depend on the step's
// seed and the input's place within the step, not on its place in the graph, so that deleting
// an earlier step (as the shrinker does) keeps the values that made a case fail.
func (b *builder) input(dt numerics.DType, shape []int, c Class) *graph.Value {
	seed := harness.SubSeed(b.s.Seed, fmt.Sprintf("input/%d", b.stepInputs))
	b.stepInputs++
	return b.inputOf(fmt.Sprintf("x%d", len(b.g.Inputs)), Fill(dt, shape, c, seed), c)
}

// inputOf adds a graph input holding t.
func (b *builder) inputOf(name string, t *tensor.Tensor, c Class) *graph.Value {
	v := &graph.Value{Name: name, Type: graph.Type{DType: t.DType, Shape: slices.Clone(t.Shape)}}
	b.g.Inputs = append(b.g.Inputs, v)
	b.vals[v] = t
	if t.DType.IsFloat() {
		b.classes[name] = c
	}
	return v
}

// pick returns the src-th most recent value (inputs and node outputs) accepted by ok, or nil
// when src is 0 or none fits.
func (b *builder) pick(src int, ok func(v *graph.Value) bool) *graph.Value {
	if src <= 0 {
		return nil
	}
	var fit []*graph.Value
	for i := len(b.g.Nodes) - 1; i >= 0; i-- {
		if v := b.g.Nodes[i].Output; ok(v) && b.takes(v) {
			fit = append(fit, v)
		}
	}
	for i := len(b.g.Inputs) - 1; i >= 0; i-- {
		if v := b.g.Inputs[i]; ok(v) && b.takes(v) {
			fit = append(fit, v)
		}
	}
	if len(fit) == 0 {
		return nil
	}
	return fit[(src-1)%len(fit)]
}

// node appends op(in...), evaluates it with the golden model and records the longest
// reduction upstream of its output.
func (b *builder) node(op string, attrs graph.Attrs, in ...*graph.Value) (*graph.Value, error) {
	n := &graph.Node{Op: op, Inputs: in, Attrs: attrs, Output: &graph.Value{Name: fmt.Sprintf("t%d", len(b.g.Nodes))}}
	t, err := graph.InferNode(n)
	if err != nil {
		return nil, err
	}
	n.Output.Type = t
	k := Terms(n)
	ts := make([]*tensor.Tensor, len(in))
	for i, v := range in {
		ts[i] = b.vals[v]
		b.read[v] = true
		k = max(k, b.k[v])
	}
	val, err := ref.Eval(n, ts)
	if err != nil {
		return nil, err
	}
	b.g.Nodes = append(b.g.Nodes, n)
	b.vals[n.Output] = val
	b.k[n.Output] = k
	return n.Output, nil
}

// Generates says whether the random-graph generator builds op on inputs of dtype dt: a
// one-step spec of it must build and end in that op (`tessera-qa ops --coverage` asks).
func Generates(op string, dt numerics.DType) error {
	for i, d := range opTable() {
		if d.Name != op {
			continue
		}
		c, err := Build(Spec{Storage: dt, Steps: []Step{{Op: i, Rank: 1, Dims: [4]int{3, 4, 5, 6}}}}, DefaultConfig())
		if err != nil {
			return err
		}
		if n := c.Graph.Nodes[len(c.Graph.Nodes)-1]; n.Op != op || n.Inputs[0].Type.DType != dt {
			return fmt.Errorf("a step of %s on %s built %s on %s", op, dt, n.Op, n.Inputs[0].Type.DType)
		}
		return nil
	}
	return fmt.Errorf("op %s is not in the generator's table (graph.Ops)", op)
}
