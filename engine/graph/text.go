package graph

import (
	"math"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// Print renders g in the canonical text format (docs/graph-format.md): two-space indent, every
// node with its type, attributes sorted by name, one output line. Parse(Print(g)) is Equal to
// g for every verified graph, and the output depends on nothing but g.
func Print(g *Graph) string {
	if g == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("graph " + g.Name + " {\n")
	if g.Mesh != nil {
		b.WriteString("  mesh " + g.Mesh.String() + "\n")
	}
	for _, v := range g.Inputs {
		b.WriteString("  input " + valueRef(v) + ": " + valueType(v) + "\n")
	}
	for _, n := range g.Nodes {
		b.WriteString("  " + valueRef(n.Output) + ": " + valueType(n.Output) + " = " + n.Op + "(")
		for i, in := range n.Inputs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(valueRef(in))
		}
		b.WriteString(")")
		if len(n.Attrs) > 0 {
			b.WriteString(" {")
			for i, k := range n.Attrs.Names() {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(k + "=" + FormatAttr(n.Attrs[k]))
			}
			b.WriteString("}")
		}
		b.WriteString("\n")
	}
	if len(g.Outputs) > 0 {
		b.WriteString("  output ")
		for i, v := range g.Outputs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(valueRef(v))
		}
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// String is Print, so a graph reads the same in logs, failure reports and files.
func (g *Graph) String() string { return Print(g) }

// FormatAttr renders one attribute value as the text format writes it.
func FormatAttr(a Attr) string {
	switch a.Kind {
	case AttrInt:
		return strconv.FormatInt(a.Int, 10)
	case AttrFloat:
		return formatFloat(a.Float)
	case AttrBool:
		return strconv.FormatBool(a.Bool)
	case AttrInts:
		parts := make([]string, len(a.Ints))
		for i, v := range a.Ints {
			parts[i] = strconv.FormatInt(v, 10)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case AttrString:
		return strconv.Quote(a.Str)
	case AttrDType:
		return a.DType.String()
	}
	return "<" + a.Kind.String() + ">"
}

// formatFloat writes the shortest form that reads back to the same bits, marked as a float
// (a '.', an exponent, inf or nan) so it never reads back as an int.
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'g', failpoint.Pick(failpoint.GraphTextFloatShort, -1, 6), 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// valueRef and valueType tolerate nil so that printing a broken graph for a report never panics.
func valueRef(v *Value) string {
	if v == nil {
		return "%<nil>"
	}
	return "%" + v.Name
}

func valueType(v *Value) string {
	if v == nil {
		return "<nil>"
	}
	return v.Type.String()
}
