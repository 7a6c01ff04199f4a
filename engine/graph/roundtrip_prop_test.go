package graph

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// TestRoundTripArbitraryStrings: every string survives the printer's quoting and the lexer.
// (No op takes an arbitrary string attribute any more: each lists its allowed values, so the
// graph-level check below draws among those.)
func TestRoundTripArbitraryStrings(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, s string) {
		text := FormatAttr(String(s))
		tok, err := newLexer(text, "s.tg").next()
		if err != nil || tok.kind != tString || tok.text != s {
			t.Fatalf("%q printed as %s lexes to %q (kind %d), %v", s, text, tok.text, tok.kind, err)
		}
	}
	check(t, "odd \"quote\" \\ tab\t nl\n nul\x00 bad\xff é ☃")
	if tok, err := newLexer(`"t\x61nh\u00e9"`, "s.tg").next(); err != nil || tok.text != "tanhé" {
		t.Errorf("escapes: got %q, %v", tok.text, err)
	}
	rapid.Check(t, func(rt *rapid.T) { check(rt, rapid.String().Draw(rt, "s")) })
}

// TestRoundTripArbitraryAttrValues drives the printer and lexer over arbitrary float bits,
// strings and int64s, the values where a text format most easily loses information.
func TestRoundTripArbitraryAttrValues(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		scale := math.Float64frombits(rapid.Uint64().Draw(rt, "scaleBits"))
		if math.IsNaN(scale) {
			scale = math.NaN() // the text has one NaN; payloads are not kept
		}
		approx := rapid.SampledFrom([]string{"erf", "tanh", "none"}).Draw(rt, "approx")
		axis := rapid.Int64Range(-2, 1).Draw(rt, "axis")
		perm := rapid.SampledFrom([][]int64{{0, 1}, {1, 0}}).Draw(rt, "perm")
		b := NewBuilder(rapid.StringMatching(`[A-Za-z_][A-Za-z0-9_.]{0,8}`).Draw(rt, "graphName"))
		name := func(label string) string { return rapid.StringMatching(`[A-Za-z_][A-Za-z0-9_.]{0,6}`).Draw(rt, label) }
		q := b.Input("q", f32, 3, 4)
		a := b.Named("a_"+name("a"), "attention", Attrs{"scale": Float(scale)}, q, q, q)
		g := b.Named("g_"+name("g"), "gelu", Attrs{"approx": String(approx)}, a)
		s := b.Named("s_"+name("s"), "softmax", Attrs{"axis": Int(axis)}, g)
		b.Output(b.Named("t_"+name("t"), "transpose", Attrs{"perm": Ints(perm...)}, s), q)
		graph, err := b.Build()
		if err != nil {
			rt.Fatal(err)
		}
		text := Print(graph)
		back, err := Parse(text, "prop.tg")
		if err != nil {
			rt.Fatalf("%v\n%s", err, text)
		}
		if d := Diff(graph, back); d != "" {
			rt.Fatalf("%s\n%s", d, text)
		}
	})
}

// specialFloats are the values a short or careless float printer loses: thirds, the ends of
// the normal and subnormal ranges, signed zeros, infinities, and integers past 2^53.
var specialFloats = []float64{
	1.0 / 3, -2.0 / 3, 0.1, 1e-300, 5e-324, -5e-324, 2.2250738585072009e-308, 2.2250738585072014e-308,
	math.Copysign(0, -1), 0, math.MaxFloat64, -math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN(),
	1e21, 1e-7, 123456789.125, 9007199254740993, 1 + 0x1p-52, math.Nextafter(1, 0), math.Pi,
}

// drawFloat draws a float64 over the whole bit space, or one of specialFloats.
func drawFloat(rt *rapid.T, label string) float64 {
	if rapid.Bool().Draw(rt, label+"Special") {
		return rapid.SampledFrom(specialFloats).Draw(rt, label)
	}
	return math.Float64frombits(rapid.Uint64().Draw(rt, label+"Bits"))
}

// TestRoundTripFloatAttrsBitForBit: every float attribute, over the whole bit space, prints
// and reads back to the same bits through the whole text format (attention's scale,
// full_like's value, layernorm's eps, which must be >= 0); so does every int64 in an int list.
func TestRoundTripFloatAttrsBitForBit(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		scale, value := drawFloat(rt, "scale"), drawFloat(rt, "value")
		eps := math.Abs(drawFloat(rt, "eps"))
		if math.IsNaN(eps) {
			eps = math.Copysign(0, -1) // -0 >= 0 holds: the verifier takes it
		}
		for _, f := range []*float64{&scale, &value} {
			if math.IsNaN(*f) {
				*f = math.NaN() // the text has one NaN; payloads are not kept
			}
		}
		tile := rapid.SliceOfN(rapid.OneOf(rapid.Int64Range(1, 1<<20), rapid.Int64Range(math.MaxInt64-1<<20, math.MaxInt64),
			rapid.Just(int64(math.MaxInt64))), 3, 3).Draw(rt, "tile")
		b := NewBuilder("floats")
		q := b.Input("q", numerics.F64, 2, 4)
		g := b.Input("gamma", numerics.F64, 4)
		a := b.Named("a", "attention", Attrs{"scale": Float(scale)}, q, q, q)
		v := b.Named("v", "full_like", Attrs{"value": Float(value)}, a)
		n := b.Named("n", "layernorm", Attrs{"eps": Float(eps)}, v, g, g)
		m := b.Named("m", "matmul", Attrs{"tile": Ints(tile...), "transpose_b": Bool(true)}, n, q)
		b.Output(m)
		graph, err := b.Build()
		if err != nil {
			rt.Fatal(err)
		}
		text := Print(graph)
		back, err := Parse(text, "floats.tg")
		if err != nil {
			rt.Fatalf("%v\n%s", err, text)
		}
		if d := Diff(graph, back); d != "" {
			rt.Fatalf("%s\n%s", d, text)
		}
		if again := Print(back); again != text {
			rt.Fatalf("printing is not stable:\n%s\nvs\n%s", text, again)
		}
	})
}

// TestRoundTripIntAttrsAtTheExtremes reads int and int-list literals at the ends of int64
// through the parser's own literal rule (no op takes every int64 as a valid value, so this
// stops before the op's rule), and refuses one past them.
func TestRoundTripIntAttrsAtTheExtremes(t *testing.T) {
	def, _ := Lookup("concat")
	read := func(text string) (Attr, error) {
		p := &parser{lx: newLexer(text, "int.tg"), file: "int.tg"}
		if err := p.advance(); err != nil {
			return Attr{}, err
		}
		return p.literal(def, "axis")
	}
	check := func(t interface{ Fatalf(string, ...any) }, a Attr) {
		text := FormatAttr(a)
		got, err := read(text)
		if err != nil || !got.Equal(a) {
			t.Fatalf("%v printed as %s reads back as %v, %v", a, text, got, err)
		}
	}
	for _, v := range []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, math.MaxInt64 - 1, math.MaxInt64} {
		check(t, Int(v))
		check(t, Ints(v, -v, math.MaxInt64, math.MinInt64))
	}
	for _, text := range []string{"9223372036854775808", "-9223372036854775809", "[0,9223372036854775808]"} {
		if _, err := read(text); err == nil {
			t.Errorf("%s reads as an int64", text)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		check(rt, Int(rapid.Int64().Draw(rt, "v")))
		check(rt, Ints(rapid.SliceOf(rapid.Int64()).Draw(rt, "vs")...))
	})
}
