// Package coverage is `tessera-qa ops --coverage`: one matrix of every op of the registry
// (engine/graph) against every check, each cell filled by asking that check's own registry
// (the golden model, the golden catalogue, the differential mapping, the VJP rules, the
// random-graph generator, the shard rules, the CPU and PTX lowerings, the benchmark table).
// A cell a check does not fill is a gap unless reasons.go states why; the package test fails
// on a gap, so a new op arrives with its cells or its reasons.
package coverage

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/bench"
	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/differential/gloo"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/property"
	"github.com/tessera-qa/tessera-qa/sharded"
)

// Checks, in the order docs/adding-an-op.md walks them.
const (
	GoldenModel = "golden-model" // engine/ref implements the op in float64
	GoldenCases = "golden-cases" // golden catalogue cases, per dtype the op accepts
	DiffTorch   = "diff-torch"   // differential mapping for torch
	DiffJAX     = "diff-jax"     // differential mapping for jax
	VJP         = "vjp"          // a gradient rule (engine/graph/vjp.go)
	Property    = "property"     // the random-graph generator builds it, per dtype
	Shard       = "shard"        // a rule of the shard pass, checked by sharded.Rules
	CPU         = "cpu-lowering" // a catalogue case compiles to Tile IR (what the CPU backend runs)
	PTX         = "ptx"          // every kernel of that program generates PTX for sm_90
	Bench       = "bench"        // a row of the benchmark table (bench/ops.go)
)

// Checks lists the columns in order.
var Checks = []string{GoldenModel, GoldenCases, DiffTorch, DiffJAX, VJP, Property, Shard, CPU, PTX, Bench}

// Cell states.
const (
	Yes     = "yes"     // the check covers the op
	Partial = "partial" // some dtypes only: Detail lists the missing ones
	Stated  = "stated"  // not covered, for the reason in Detail (reasons.go or the op's NoGrad)
	Missing = "MISSING" // not covered and no reason: a gap
)

// Cell is one (op, check).
type Cell struct {
	Check  string `json:"check"`
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
}

// Row is one op.
type Row struct {
	Op    string `json:"op"`
	Kind  string `json:"kind"`
	Cells []Cell `json:"cells"`
}

// Gap is a cell without coverage or reason.
type Gap struct{ Op, Check, Detail string }

func (g Gap) String() string { return g.Op + " x " + g.Check + ": " + g.Detail }

// Sources are the registries a matrix is filled from; Registries gives the real ones, tests
// substitute ops.
type Sources struct {
	Ops     []*graph.OpDef
	Specs   []golden.Spec
	Reasons []Reason
}

// Registries are this build's: every op (collectives last), the golden catalogue, reasons.go.
func Registries() Sources {
	return Sources{Ops: append(graph.Ops(), graph.CollectiveOps()...), Specs: append(golden.Catalogue(), golden.DistCatalogue()...), Reasons: Reasons}
}

// Matrix fills one row per op.
func Matrix(src Sources) []Row {
	byOp := map[string][]golden.Spec{}
	for _, s := range src.Specs {
		byOp[s.Op] = append(byOp[s.Op], s)
	}
	shardRules, shardKinds := map[string]string{}, map[graph.OpKind]string{}
	for _, r := range sharded.Rules() {
		op, _, _ := strings.Cut(r.Name, "/")
		shardRules[op] = r.Name
		if d, ok := graph.Lookup(op); ok && shardKinds[d.Kind] == "" {
			shardKinds[d.Kind] = op
		}
	}
	benchRows, benchErr := bench.RowOps()
	var rows []Row
	for _, d := range src.Ops {
		specs := byOp[d.Name]
		cpu, ptxCell := lowerings(d, specs)
		cells := []Cell{
			goldenModel(d, specs),
			goldenCases(d, specs),
			mapped(DiffTorch, d.Name, func(m differential.OpMapping) string { return m.Torch }),
			mapped(DiffJAX, d.Name, func(m differential.OpMapping) string { return m.JAX }),
			vjp(d),
			generated(d),
			shard(d, specs, shardRules, shardKinds),
			cpu, ptxCell,
			benchCell(benchRows[d.Name], benchErr),
		}
		for i, c := range cells {
			if c.State == Missing || c.State == Partial {
				if why, ok := reasonFor(src.Reasons, d, c.Check); ok {
					cells[i] = Cell{Check: c.Check, State: Stated, Detail: why}
					if c.State == Partial {
						cells[i].Detail = c.Detail + ": " + why
					}
				}
			}
		}
		rows = append(rows, Row{Op: d.Name, Kind: kindName(d.Kind), Cells: cells})
	}
	return rows
}

// Gaps lists every cell that is neither covered nor explained.
func Gaps(rows []Row) []Gap {
	var out []Gap
	for _, r := range rows {
		for _, c := range r.Cells {
			if c.State == Missing || c.State == Partial {
				out = append(out, Gap{r.Op, c.Check, c.Detail})
			}
		}
	}
	return out
}

// goldenModel: engine/ref implements the op (ref.Has); a collective's golden model is
// ref.RunDist, which golden's dist check runs on the op's dist catalogue cases.
func goldenModel(d *graph.OpDef, specs []golden.Spec) Cell {
	if ref.Has(d.Name) {
		return Cell{Check: GoldenModel, State: Yes}
	}
	if d.Kind == graph.KindCollective && len(specs) > 0 {
		return Cell{Check: GoldenModel, State: Yes, Detail: "ref.RunDist (" + specs[0].Name + ")"}
	}
	return Cell{Check: GoldenModel, State: Missing, Detail: "engine/ref has no implementation"}
}

// shard asks the shard pass to place the op's first catalogue case on a two-rank mesh
// (replicated inputs: only whether the pass has a rule for it is asked), and sharded.Rules
// for the rule that checks it: the op's own, or one of its kind (the pass rules by kind).
func shard(d *graph.OpDef, specs []golden.Spec, rules map[string]string, kinds map[graph.OpKind]string) Cell {
	for _, s := range specs {
		if s.Graph.Mesh != nil {
			continue
		}
		m, err := mesh.New([]mesh.Axis{{Name: "x", Size: 2}}, nil)
		if err == nil {
			err = protect(func() error { _, _, err := compiler.Shard(s.Graph, m, nil); return err })
		}
		if err != nil && errs.CodeOf(err) == errs.Unsupported {
			return Cell{Check: Shard, State: Missing, Detail: oneLine(err.Error())}
		}
		break
	}
	if r, ok := rules[d.Name]; ok {
		return Cell{Check: Shard, State: Yes, Detail: r}
	}
	if op, ok := kinds[d.Kind]; ok {
		return Cell{Check: Shard, State: Yes, Detail: "the " + kindName(d.Kind) + " rule (checked on " + op + ")"}
	}
	return Cell{Check: Shard, State: Missing, Detail: "sharded.Rules checks no op of kind " + kindName(d.Kind)}
}

func benchCell(rows []string, err error) Cell {
	switch {
	case err != nil:
		return Cell{Check: Bench, State: Missing, Detail: "bench rows do not build: " + oneLine(err.Error())}
	case len(rows) == 0:
		return Cell{Check: Bench, State: Missing, Detail: "no row of bench/ops.go runs it"}
	}
	return Cell{Check: Bench, State: Yes, Detail: strings.Join(rows, ",")}
}

// goldenCases counts catalogue cases per dtype the op accepts.
func goldenCases(d *graph.OpDef, specs []golden.Spec) Cell {
	have := map[numerics.DType]bool{}
	for _, s := range specs {
		have[s.DType] = true
	}
	var missing []string
	for _, dt := range d.DTypes {
		if !have[dt] {
			missing = append(missing, dt.String())
		}
	}
	switch {
	case len(specs) == 0:
		return Cell{Check: GoldenCases, State: Missing, Detail: "no golden catalogue case"}
	case len(missing) > 0:
		return Cell{Check: GoldenCases, State: Partial, Detail: fmt.Sprintf("%d cases; none on %s", len(specs), strings.Join(missing, ","))}
	}
	return Cell{Check: GoldenCases, State: Yes, Detail: fmt.Sprintf("%d cases, every dtype", len(specs))}
}

func mapped(check, op string, col func(differential.OpMapping) string) Cell {
	if check == DiffTorch && slices.Contains(gloo.Ops, op) {
		return Cell{Check: check, State: Yes, Detail: "torch.distributed gloo (differential/collective)"}
	}
	m, ok := differential.MappingOf(op)
	if !ok || col(m) == "" {
		return Cell{Check: check, State: Missing, Detail: "no row in differential/mapping.go"}
	}
	return Cell{Check: check, State: Yes, Detail: col(m)}
}

// vjp: a rule, or the op's own stated NoGrad (engine/graph: the registry says why).
func vjp(d *graph.OpDef) Cell {
	switch {
	case d.Grad != nil:
		return Cell{Check: VJP, State: Yes}
	case d.NoGrad != "":
		return Cell{Check: VJP, State: Stated, Detail: d.NoGrad}
	}
	return Cell{Check: VJP, State: Missing, Detail: "no Grad and no NoGrad in the registry"}
}

// generated asks the random-graph generator to build the op on each of its dtypes.
func generated(d *graph.OpDef) Cell {
	var missing []string
	var first error
	for _, dt := range d.DTypes {
		if err := protect(func() error { return property.Generates(d.Name, dt) }); err != nil {
			missing = append(missing, dt.String())
			if first == nil {
				first = err
			}
		}
	}
	switch {
	case len(missing) == len(d.DTypes):
		detail := "the generator builds it on no dtype"
		if first != nil {
			detail += ": " + oneLine(first.Error())
		}
		return Cell{Check: Property, State: Missing, Detail: detail}
	case len(missing) > 0:
		return Cell{Check: Property, State: Partial, Detail: "not on " + strings.Join(missing, ",")}
	}
	return Cell{Check: Property, State: Yes}
}

// lowerings compiles the op's first catalogue case that compiles (collectives: for the mesh
// of their case) and generates PTX for every kernel of it.
func lowerings(d *graph.OpDef, specs []golden.Spec) (cpu, ptxCell Cell) {
	if len(specs) == 0 {
		return Cell{Check: CPU, State: Missing, Detail: "no golden case to lower"}, Cell{Check: PTX, State: Missing, Detail: "no golden case to lower"}
	}
	var firstErr error
	for _, s := range specs {
		var p *compiler.Program
		err := protect(func() (err error) { p, err = compileSpec(s); return })
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		cpu = Cell{Check: CPU, State: Yes, Detail: fmt.Sprintf("%s: %d kernels", s.Name, len(p.Kernels))}
		for _, k := range p.Kernels {
			if err := protect(func() error { _, err := ptx.Generate(k, ptx.H100); return err }); err != nil {
				return cpu, Cell{Check: PTX, State: Missing, Detail: s.Name + ": " + oneLine(err.Error())}
			}
		}
		return cpu, Cell{Check: PTX, State: Yes, Detail: fmt.Sprintf("%s: %d kernels", s.Name, len(p.Kernels))}
	}
	why := "no catalogue case compiles: " + oneLine(firstErr.Error())
	return Cell{Check: CPU, State: Missing, Detail: why}, Cell{Check: PTX, State: Missing, Detail: why}
}

// compileSpec compiles a catalogue case. A graph with a mesh line has no one-device program:
// its collectives run in engine/dist between compiled segments, so it does not count.
func compileSpec(s golden.Spec) (*compiler.Program, error) {
	if s.Graph.Mesh != nil {
		return nil, fmt.Errorf("%s runs over a mesh: collectives run in engine/dist, not as kernels", s.Name)
	}
	return compiler.Compile(s.Graph, compiler.Options{})
}

func protect(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

func kindName(k graph.OpKind) string { return k.String() }
