package negative

import (
	"fmt"
	"math"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// SpecialFloats are the float attribute values a careless printer loses: thirds, the ends of
// the normal and subnormal ranges, signed zeros, infinities, NaN, integers past 2^53.
var SpecialFloats = []float64{
	1.0 / 3, -2.0 / 3, 0.1, 1e-300, 5e-324, -5e-324, 2.2250738585072009e-308, math.Copysign(0, -1),
	math.MaxFloat64, -math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN(), 1e21, 9007199254740993, math.Pi,
}

// FloatAttrsRoundTrip prints a graph whose float attributes are the given values (attention's
// scale, full_like's value; layernorm's eps gets |eps|, since it must be >= 0, and -0 for NaN)
// and its matmul tile hint, parses it back and returns nil when every attribute kept its bits.
func FloatAttrsRoundTrip(scale, value, eps float64, tile []int64) error {
	if math.IsNaN(eps) {
		eps = math.Copysign(0, -1)
	}
	b := graph.NewBuilder("floats")
	q := b.Input("q", numerics.F64, 2, 4)
	g := b.Input("gamma", numerics.F64, 4)
	a := b.Named("a", "attention", graph.Attrs{"scale": graph.Float(scale)}, q, q, q)
	v := b.Named("v", "full_like", graph.Attrs{"value": graph.Float(value)}, a)
	n := b.Named("n", "layernorm", graph.Attrs{"eps": graph.Float(math.Abs(eps))}, v, g, g)
	b.Output(b.Named("m", "matmul", graph.Attrs{"tile": graph.Ints(tile...), "transpose_b": graph.Bool(true)}, n, q))
	built, err := b.Build()
	if err != nil {
		return err
	}
	text := graph.Print(built)
	back, err := graph.Parse(text, "floats.tg")
	if err != nil {
		return fmt.Errorf("printed graph does not parse: %v\n%s", err, text)
	}
	if d := graph.Diff(built, back); d != "" {
		return fmt.Errorf("%s\n%s", d, text)
	}
	return nil
}
