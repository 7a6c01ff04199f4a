package graph

import (
	"math"
	"testing"

	"pgregory.net/rapid"
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
