package bench

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Case is one benchmark row: an op of the table at one dtype and shape.
type Case struct {
	Op    string
	DType numerics.DType
	Shape []int
}

func (c Case) String() string { return c.Op + "/" + c.DType.String() + "/" + ShapeString(c.Shape) }

// ShapeString joins dims with 'x' ("8192x8192").
func ShapeString(shape []int) string {
	s := make([]string, len(shape))
	for i, d := range shape {
		s[i] = strconv.Itoa(d)
	}
	return strings.Join(s, "x")
}

// Selection is what the command line asks for. Empty fields mean each op's defaults.
//
// Shapes: "AxB..." applies to every selected op whose shape has that many dims (R C for the
// row ops, M N K for matmul, B M N K for batch_matmul, B H S D for attention); "op:AxB..."
// applies to that op only. An op no shape applies to keeps its default shapes.
type Selection struct {
	Ops    []string
	Shapes []string
	DTypes []string
}

// benchDTypes are the dtypes both sides can run (torch has no fp8 kernels for most ops).
var benchDTypes = []numerics.DType{numerics.F64, numerics.F32, numerics.F16, numerics.BF16}

// Select expands a selection into cases, in table order, then shape order, then dtype order.
func Select(sel Selection) ([]Case, error) {
	var chosen []opDef
	for _, name := range sel.Ops {
		o, ok := opByName(name)
		if !ok {
			return nil, errs.New(errs.Input, "bench: unknown op %q (ops: %s)", name, strings.Join(OpNames(), ", "))
		}
		if !slices.ContainsFunc(chosen, func(c opDef) bool { return c.name == name }) {
			chosen = append(chosen, o)
		}
	}
	if len(chosen) == 0 {
		chosen = ops
	} else {
		// Table order, whatever order the flag listed them in.
		slices.SortFunc(chosen, func(a, b opDef) int { return slices.Index(OpNames(), a.name) - slices.Index(OpNames(), b.name) })
	}
	var dts []numerics.DType
	for _, s := range sel.DTypes {
		dt, err := numerics.Parse(s)
		if err != nil || !slices.Contains(benchDTypes, dt) {
			return nil, errs.New(errs.Input, "bench: dtype %q: want one of f64, f32, f16, bf16", s)
		}
		if !slices.Contains(dts, dt) {
			dts = append(dts, dt)
		}
	}
	shapes := map[string][][]int{} // op -> shapes given for it
	for _, tok := range sel.Shapes {
		opName, dimsText, scoped := strings.Cut(tok, ":")
		if !scoped {
			opName, dimsText = "", tok
		}
		shape, err := ParseShape(dimsText)
		if err != nil {
			return nil, err
		}
		used := false
		for _, o := range chosen {
			if (scoped && o.name == opName || !scoped) && len(o.dims) == len(shape) {
				shapes[o.name] = append(shapes[o.name], shape)
				used = true
			}
		}
		if !used {
			if scoped {
				if _, ok := opByName(opName); !ok {
					return nil, errs.New(errs.Input, "bench: --shapes %q: unknown op %q", tok, opName)
				}
				return nil, errs.New(errs.Input, "bench: --shapes %q: op %s is not selected or its shape is not %d-dimensional", tok, opName, len(shape))
			}
			return nil, errs.New(errs.Input, "bench: --shapes %q: no selected op takes a %d-dimensional shape", tok, len(shape))
		}
	}
	var cases []Case
	for _, o := range chosen {
		ss := shapes[o.name]
		if len(ss) == 0 {
			ss = o.shapes
		}
		ds := dts
		if len(ds) == 0 || o.ownDTypes {
			ds = o.dtypes
		}
		for _, s := range ss {
			for _, dt := range ds {
				cases = append(cases, Case{Op: o.name, DType: dt, Shape: slices.Clone(s)})
			}
		}
	}
	return cases, nil
}

// ParseShape reads "AxBxC" (positive dims).
func ParseShape(s string) ([]int, error) {
	parts := strings.Split(strings.TrimSpace(s), "x")
	shape := make([]int, 0, len(parts))
	for _, p := range parts {
		d, err := strconv.Atoi(p)
		if err != nil || d < 1 || d > 1<<30 {
			return nil, errs.New(errs.Input, "bench: shape %q: dims must be positive integers joined by 'x' (e.g. 8192x8192)", s)
		}
		shape = append(shape, d)
	}
	return shape, nil
}

// Describe is a one-line summary of the op table for --help.
func Describe() string {
	var b strings.Builder
	for _, o := range ops {
		def := make([]string, len(o.shapes))
		for i, s := range o.shapes {
			def[i] = ShapeString(s)
		}
		dts := make([]string, len(o.dtypes))
		for i, d := range o.dtypes {
			dts[i] = d.String()
		}
		b.WriteString("  " + o.name + strings.Repeat(" ", max(1, 18-len(o.name))) + "[" + strings.Join(o.dims, " ") + "] default " +
			strings.Join(def, ", ") + " " + strings.Join(dts, ",") + "\n")
	}
	return b.String()
}
