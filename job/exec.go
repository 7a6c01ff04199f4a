package job

import (
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// RefBackend is the backend name under which Exec runs the golden model (engine/ref) instead
// of compiling the graph.
const RefBackend = "ref"

// LoadInputs reads an .npz holding exactly the graph's inputs, one array per input value
// named after it, each interpreted with the dtype the graph declares (16-bit floats as '<u2'
// bit patterns, fp8 as '|u1'). A missing or extra array is E_INPUT, an array that cannot be
// read as the declared dtype E_DTYPE, one of the wrong shape E_SHAPE.
func LoadInputs(g *graph.Graph, path string) (map[string]*tensor.Tensor, error) {
	arrays, err := tensor.ReadNPZFile(path)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*tensor.Array, len(arrays))
	for _, a := range arrays {
		v := g.Value(a.Name)
		if v == nil || !slices.Contains(g.Inputs, v) {
			return nil, errs.New(errs.Input, "%s: array %q is not an input of graph %s (inputs: %s)", path, a.Name, g.Name, inputList(g))
		}
		byName[a.Name] = a
	}
	out := make(map[string]*tensor.Tensor, len(g.Inputs))
	for _, v := range g.Inputs {
		a, ok := byName[v.Name]
		if !ok {
			return nil, errs.New(errs.Input, "%s: no array for input %%%s (%s) of graph %s", path, v.Name, v.Type, g.Name)
		}
		t, err := a.As(v.Type.DType)
		if err != nil {
			return nil, errs.Wrap(errs.DType, err, "%s: input %%%s is declared %s", path, v.Name, v.Type)
		}
		if !slices.Equal(t.Shape, v.Type.Shape) {
			return nil, errs.New(errs.Shape, "%s: input %%%s has shape %v, graph %s declares %s", path, v.Name, t.Shape, g.Name, v.Type)
		}
		out[v.Name] = t
	}
	if err := graph.CheckInputs(g, out); err != nil {
		return nil, errs.Wrap(errs.Input, err, "%s", path)
	}
	return out, nil
}

func inputList(g *graph.Graph) string {
	names := make([]string, len(g.Inputs))
	for i, v := range g.Inputs {
		names[i] = "%" + v.Name
	}
	return strings.Join(names, ", ")
}

// ExecResult is what Exec ran and produced.
type ExecResult struct {
	Backend      string
	Device       string
	ScheduleHash string // "" for the golden model
	Outputs      []*tensor.Tensor
}

// Exec runs g on inputs with the named backend ("" means cpu; RefBackend runs the golden
// model). A named backend that cannot run here is E_NO_DEVICE.
func Exec(g *graph.Graph, backendName string, inputs map[string]*tensor.Tensor) (ExecResult, error) {
	if backendName == RefBackend {
		outs, err := ref.Run(g, inputs)
		return ExecResult{Backend: RefBackend, Device: "golden model (float64)", Outputs: outs}, err
	}
	if backendName == "" {
		backendName = "cpu"
	}
	c, err := ChooseBackend(backendName)
	if err != nil {
		return ExecResult{}, err
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		return ExecResult{}, err
	}
	outs, err := c.Backend.Run(p, inputs)
	if err != nil {
		return ExecResult{}, err
	}
	if len(outs) != len(g.Outputs) {
		return ExecResult{}, errs.New(errs.Internal, "backend %s returned %d outputs for graph %s with %d", c.Backend.Name(), len(outs), g.Name, len(g.Outputs))
	}
	return ExecResult{Backend: c.Backend.Name(), Device: c.Backend.Device(), ScheduleHash: p.ScheduleHash, Outputs: outs}, nil
}

// OutputNames returns the .npz array name of each graph output and the outputs to write: one
// array per distinct output value, named after it (a value listed twice is written once).
func OutputNames(g *graph.Graph, outs []*tensor.Tensor) ([]string, []*tensor.Tensor) {
	var names []string
	var ts []*tensor.Tensor
	for i, v := range g.Outputs {
		if i >= len(outs) || slices.Contains(names, v.Name) {
			continue
		}
		names = append(names, v.Name)
		ts = append(ts, outs[i])
	}
	return names, ts
}

// WriteOutputs writes the outputs to path atomically (tensor.WriteNPZFile): on failure an
// existing file at path is left as it was.
func WriteOutputs(path string, g *graph.Graph, outs []*tensor.Tensor) error {
	names, ts := OutputNames(g, outs)
	return tensor.WriteNPZFile(path, names, ts)
}
