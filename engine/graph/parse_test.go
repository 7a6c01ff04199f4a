package graph

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// specExample is the example of docs/graph-format.md, written by hand: comments, blank lines,
// an omitted output type, unsorted attributes and spaces inside brackets.
const specExample = `# comments run to end of line
graph mlp {
  input %x: f32[4,8]
  input %w: f32[8,16]
  input %s: f32[]                      # scalar

  %h: f32[4,16] = matmul(%x, %w) {transpose_b=false, tile=[32, 32, 16]}
  %y = relu(%h)                        # output type optional when writing by hand; inferred
  %z: bf16[4,16] = cast(%y) {to=bf16}
  output %z, %h
}
`

func mustParse(t *testing.T, src string) *Graph {
	t.Helper()
	g, err := Parse(src, "t.tg")
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, src)
	}
	return g
}

func TestParseSpecExample(t *testing.T) {
	g := mustParse(t, specExample)
	if g.Name != "mlp" || len(g.Inputs) != 3 || len(g.Nodes) != 3 || len(g.Outputs) != 2 {
		t.Fatalf("unexpected structure:\n%s", Print(g))
	}
	if y := g.Value("y"); y == nil || y.Type.String() != "f32[4,16]" {
		t.Fatalf("%%y should be inferred f32[4,16], got %v", y)
	}
	if s := g.Value("s"); s.Type.Rank() != 0 {
		t.Fatalf("%%s should be a scalar, got %s", s.Type)
	}
	if g.Outputs[0].Name != "z" || g.Outputs[1].Name != "h" {
		t.Fatal("outputs must keep the order written")
	}
	if a := g.Nodes[0].Attrs["tile"]; !a.Equal(Ints(32, 32, 16)) {
		t.Fatalf("tile = %+v", a)
	}
	roundTrip(t, g)
}

func TestParseDocExamples(t *testing.T) {
	files, err := filepath.Glob("../../docs/examples/*.tg")
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/examples/*.tg found (%v)", err)
	}
	for _, f := range files {
		g, err := ParseFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		roundTrip(t, g)
	}
	// Every ```tg block in the reference must parse unless it is marked as an error example.
	doc, err := os.ReadFile("../../docs/graph-format.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for i, block := range strings.Split(string(doc), "```tg\n")[1:] {
		src := block[:strings.Index(block, "```")]
		if strings.HasPrefix(src, "# error:") {
			want := strings.TrimSpace(strings.TrimPrefix(src[:strings.Index(src, "\n")], "# error:"))
			if _, err := Parse(src, "doc.tg"); err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("doc block %d: want an error starting %q, got %v", i, want, err)
			}
			continue
		}
		blocks++
		if _, err := Parse(src, "doc.tg"); err != nil {
			t.Errorf("doc block %d: %v\n%s", i, err, src)
		}
	}
	if blocks < 3 {
		t.Fatalf("found only %d tg blocks in the doc", blocks)
	}
	mlp, err := os.ReadFile("../../docs/examples/mlp.tg")
	if err != nil || !strings.Contains(string(doc), "```tg\n"+string(mlp)+"```") {
		t.Fatalf("docs/graph-format.md must show docs/examples/mlp.tg verbatim (%v)", err)
	}
}

func TestParseIntLiteralForFloatAttr(t *testing.T) {
	g := mustParse(t, `graph n {
  input %x: f32[2,4]
  input %g: f32[4]
  %y = rmsnorm(%x, %g) {eps=1}
  output %y
}`)
	if a := g.Nodes[0].Attrs["eps"]; !a.Equal(Float(1)) {
		t.Fatalf("eps=1 should read as Float(1), got %+v", a)
	}
	// The conversion follows the spec only: an int attribute stays an int, and a float
	// literal for an int attribute is InferNode's kind error.
	g = mustParse(t, "graph n {\n input %x: f32[2,4]\n %y = softmax(%x) {axis=0}\n output %y\n}")
	if a := g.Nodes[0].Attrs["axis"]; !a.Equal(Int(0)) {
		t.Fatalf("axis=0 should stay Int, got %+v", a)
	}
	_, err := Parse("graph n {\n input %x: f32[2,4]\n %y = softmax(%x) {axis=0.0}\n output %y\n}", "k.tg")
	if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "k.tg:3:2: ") || !strings.Contains(err.Error(), "must be int, got float") {
		t.Fatalf("axis=0.0: %v", err)
	}
}

func TestParseLiterals(t *testing.T) {
	for _, c := range []struct {
		lit  string
		want Attr
	}{
		{"0.125", Float(0.125)}, {"1e-05", Float(1e-5)}, {"2E3", Float(2000)}, {"-1.5e+2", Float(-150)},
		{"inf", Float(math.Inf(1))}, {"-inf", Float(math.Inf(-1))}, {"nan", Float(math.NaN())},
		{"-0.0", Float(math.Copysign(0, -1))}, {"3", Float(3)}, {"-7", Float(-7)}, {"5.", Float(5)},
		{"4.9e-324", Float(5e-324)}, {"9007199254740993", Float(9007199254740992)},
	} {
		src := fmt.Sprintf("graph l {\n input %%q: f32[2,4]\n %%y = attention(%%q, %%q, %%q) {scale=%s}\n output %%y\n}", c.lit)
		g := mustParse(t, src)
		if a := g.Nodes[0].Attrs["scale"]; !a.Equal(c.want) {
			t.Errorf("scale=%s read as %+v, want %+v", c.lit, a, c.want)
		}
	}
	g := mustParse(t, `graph s {
  input %x: f32[3]
  %y = gelu(%x) {approx="t\x61n\u0068"}
  output %y
}`)
	if s := g.Nodes[0].StringAttr("approx"); s != "tanh" {
		t.Fatalf("escapes: got %q", s)
	}
	g = mustParse(t, "graph e {\n input %x: f32[2,3]\n %y = transpose(%x) {perm=[1,0]}\n output %y\n}")
	if a := g.Nodes[0].Attrs["perm"]; a.Kind != AttrInts || len(a.Ints) != 2 {
		t.Fatalf("perm=[1,0] read as %+v", a)
	}
	// An empty axes list reduces every axis, as torch.sum(x, dim=[]) does, and prints back as [].
	g = mustParse(t, "graph e {\n input %x: f32[2,3]\n %y = reduce_sum(%x) {axes=[]}\n output %y\n}")
	if a, ok := g.Nodes[0].Attrs["axes"]; !ok || a.Kind != AttrInts || len(a.Ints) != 0 || g.Nodes[0].Output.Type.Rank() != 0 {
		t.Fatalf("axes=[] read as %+v, type %s", a, g.Nodes[0].Output.Type)
	}
	if !strings.Contains(Print(g), "{axes=[]}") {
		t.Fatalf("axes=[] not printed back:\n%s", Print(g))
	}
}

func TestParseLayout(t *testing.T) {
	// CRLF line ends, tabs, comments everywhere, blank lines before and after.
	src := "\r\n# head\r\n\r\ngraph\tcrlf {  # open\r\n\tinput %x: int8[2] # in\r\n\r\n  %y=neg(%x)#tight\r\n  output %y\r\n}\r\n# tail\r\n\r\n"
	g := mustParse(t, src)
	if g.Name != "crlf" || g.Nodes[0].Output.Type.DType != numerics.I8 {
		t.Fatalf("unexpected graph:\n%s", Print(g))
	}
	// Several output lines append in order.
	g = mustParse(t, "graph o {\n input %a: f32[1]\n input %b: f32[1]\n output %b\n output %a, %b\n}")
	if Print(g) != "graph o {\n  input %a: f32[1]\n  input %b: f32[1]\n  output %b, %a, %b\n}\n" {
		t.Fatalf("outputs:\n%s", Print(g))
	}
}

// TestParseErrors checks each error class: its code and its file:line:col.
func TestParseErrors(t *testing.T) {
	const head = "graph e {\n  input %x: f32[4,8]\n  input %w: f32[8,16]\n"
	for _, c := range []struct {
		name, src string
		want      string // "E_CODE: e.tg:L:C: " prefix
		contains  string
	}{
		{"empty file", "", "E_PARSE: e.tg:1:1: ", "expected 'graph NAME {'"},
		{"no graph keyword", "grph g {\n}", "E_PARSE: e.tg:1:1: ", "expected 'graph NAME {'"},
		{"missing name", "graph {\n}", "E_PARSE: e.tg:1:7: ", "graph name"},
		{"missing brace", "graph g\n", "E_PARSE: e.tg:1:8: ", "expected '{'"},
		{"unknown op", head + "  %h = matmull(%x, %w)\n  output %h\n}", "E_UNSUPPORTED: e.tg:4:8: ", `unknown op "matmull"`},
		{"unknown value", head + "  %h = matmul(%x, %v)\n  output %h\n}", "E_PARSE: e.tg:4:19: ", "%v is not defined"},
		{"unknown output", head + "  output %q\n}", "E_PARSE: e.tg:4:10: ", "%q is not defined"},
		{"use before def", head + "  %a = relu(%b)\n  %b = relu(%x)\n  output %a\n}", "E_PARSE: e.tg:4:13: ", "%b is not defined"},
		{"redefine input", head + "  input %x: f32[1]\n  output %x\n}", "E_PARSE: e.tg:4:9: ", "already defined at 2:9"},
		{"redefine node", head + "  %h = relu(%x)\n  %h = relu(%x)\n  output %h\n}", "E_PARSE: e.tg:5:3: ", "already defined at 4:3"},
		{"node shadows input", head + "  %w = relu(%x)\n  output %w\n}", "E_PARSE: e.tg:4:3: ", "%w is already defined"},
		{"unknown dtype", "graph e {\n  input %x: f33[4]\n  output %x\n}", "E_DTYPE: e.tg:2:13: ", `unknown dtype "f33"`},
		{"negative dim", "graph e {\n  input %x: f32[-2]\n  output %x\n}", "E_SHAPE: e.tg:2:13: ", "dims must be >= 0"},
		// An empty tensor is allowed, but the dims beside its 0 are still bounded (strides).
		{"huge dim beside a zero", "graph e {\n  input %x: f32[0,65536,65536]\n  output %x\n}", "E_SHAPE: e.tg:2:13: ", "exceeds"},
		{"huge dim", "graph e {\n  input %x: f32[99999999999999999999]\n  output %x\n}", "E_SHAPE: e.tg:2:17: ", "out of range"},
		{"too many elements", "graph e {\n  input %x: f32[65536,65536]\n  output %x\n}", "E_SHAPE: e.tg:2:13: ", "exceeds"},
		{"wrapping dims", "graph e {\n  input %x: f32[3,6148914691236517206]\n  output %x\n}", "E_SHAPE: e.tg:2:13: ", "exceeds 268435456 elements"},
		{"inferred wrapping dims", "graph e {\n  input %x: f32[2]\n  %y = reshape(%x) {shape=[3,6148914691236517206]}\n  output %y\n}", "E_SHAPE: e.tg:3:3: ", "reshape to [3 6148914691236517206]: more than 268435456 elements"},
		{"inferred too large", "graph e {\n  input %a: f32[16384,1]\n  input %b: f32[1,32768]\n  %y = add(%a, %b)\n  output %y\n}", "E_SHAPE: e.tg:4:3: ", "exceeds 268435456 elements"},
		{"rank too high", "graph e {\n  input %x: f32[1,1,1,1,1,1,1,1,1]\n  output %x\n}", "E_SHAPE: e.tg:2:13: ", "rank exceeds 8"},
		{"shape not closed", "graph e {\n  input %x: f32[4,8\n  output %x\n}", "E_PARSE: e.tg:2:20: ", "expected ','"},
		{"type without brackets", "graph e {\n  input %x: f32\n  output %x\n}", "E_PARSE: e.tg:2:16: ", "a scalar is f32[]"},
		{"input without type", "graph e {\n  input %x\n  output %x\n}", "E_PARSE: e.tg:2:11: ", "expected ':'"},
		{"float dim", "graph e {\n  input %x: f32[4.0]\n  output %x\n}", "E_PARSE: e.tg:2:17: ", "expected a dim"},
		{"bad attr literal", head + "  %h = matmul(%x, %w) {transpose_b=yes}\n  output %h\n}", "E_PARSE: e.tg:4:36: ", "bad value yes"},
		{"unquoted string", "graph e {\n  input %x: f32[4]\n  %y = gelu(%x) {approx=tanh}\n  output %y\n}", "E_PARSE: e.tg:3:25: ", `strings need quotes (approx="tanh")`},
		{"bad dtype attr", "graph e {\n  input %x: f32[4]\n  %y = cast(%x) {to=f33}\n  output %y\n}", "E_DTYPE: e.tg:3:21: ", `unknown dtype "f33"`},
		{"float in list", head + "  %h = matmul(%x, %w) {tile=[1.5]}\n  output %h\n}", "E_PARSE: e.tg:4:30: ", "integers only"},
		{"int overflow", "graph e {\n  input %x: f32[4]\n  %y = softmax(%x) {axis=9223372036854775808}\n  output %y\n}", "E_PARSE: e.tg:3:26: ", "out of range for int64"},
		{"float overflow", "graph e {\n  input %x: f32[4,4]\n  %y = attention(%x, %x, %x) {scale=1e999}\n  output %y\n}", "E_PARSE: e.tg:3:37: ", "out of range for f64"},
		{"malformed number", "graph e {\n  input %x: f32[4]\n  %y = softmax(%x) {axis=1.2.3}\n  output %y\n}", "E_PARSE: e.tg:3:26: ", `malformed number "1.2.3"`},
		{"bad exponent", "graph e {\n  input %x: f32[4]\n  %y = softmax(%x) {axis=1e}\n  output %y\n}", "E_PARSE: e.tg:3:26: ", "exponent needs digits"},
		{"duplicate attr", "graph e {\n  input %x: f32[4]\n  %y = softmax(%x) {axis=0, axis=0}\n  output %y\n}", "E_PARSE: e.tg:3:29: ", "given twice"},
		{"unknown attr", "graph e {\n  input %x: f32[4]\n  %y = softmax(%x) {axes=0}\n  output %y\n}", "E_INPUT: e.tg:3:3: ", `softmax has no attribute "axes"`},
		{"attr of wrong kind", head + "  %h = matmul(%x, %w) {transpose_b=1}\n  output %h\n}", "E_INPUT: e.tg:4:3: ", "must be bool, got int"},
		{"missing required attr", "graph e {\n  input %x: f32[4]\n  %y = cast(%x)\n  output %y\n}", "E_INPUT: e.tg:3:3: ", "needs attribute to"},
		{"arity", "graph e {\n  input %x: f32[4]\n  %y = add(%x)\n  output %y\n}", "E_INPUT: e.tg:3:3: ", "takes 2 inputs"},
		{"shape inference", head + "  %h = matmul(%w, %x)\n  output %h\n}", "E_SHAPE: e.tg:4:3: ", "inner dims differ"},
		{"dtype inference", "graph e {\n  input %x: int8[4]\n  %y = exp(%x)\n  output %y\n}", "E_DTYPE: e.tg:3:3: ", "does not accept int8"},
		{"shape mismatch", head + "  %h: f32[4,8] = matmul(%x, %w)\n  output %h\n}", "E_SHAPE: e.tg:4:7: ", "written f32[4,8] but matmul infers f32[4,16]"},
		{"dtype mismatch", head + "  %h: bf16[4,16] = matmul(%x, %w)\n  output %h\n}", "E_DTYPE: e.tg:4:7: ", "written bf16[4,16] but matmul infers f32[4,16]"},
		{"missing output", head + "  %h = matmul(%x, %w)\n}", "E_PARSE: e.tg:5:1: ", "no output line"},
		{"empty output list", head + "  output\n}", "E_PARSE: e.tg:4:9: ", "expected a value"},
		{"trailing junk in line", head + "  %h = matmul(%x, %w) x\n  output %h\n}", "E_PARSE: e.tg:4:23: ", "one statement per line"},
		{"trailing junk after graph", head + "  output %x\n}\ngraph f {", "E_PARSE: e.tg:6:1: ", "after the graph's closing '}'"},
		{"closing brace on statement line", head + "  output %x }", "E_PARSE: e.tg:4:13: ", "one statement per line"},
		{"unterminated string", "graph e {\n  input %x: f32[4]\n  %y = gelu(%x) {approx=\"tanh}\n  output %y\n}", "E_PARSE: e.tg:3:25: ", "unterminated string"},
		{"bad escape", "graph e {\n  input %x: f32[4]\n  %y = gelu(%x) {approx=\"\\q\"}\n  output %y\n}", "E_PARSE: e.tg:3:25: ", "invalid escape"},
		{"unterminated attr brace", head + "  %h = matmul(%x, %w) {transpose_b=true\n  output %h\n}", "E_PARSE: e.tg:4:40: ", "unterminated '{' opened at 4:23"},
		{"unterminated list", head + "  %h = matmul(%x, %w) {tile=[1,2\n  output %h\n}", "E_PARSE: e.tg:4:33: ", "unterminated '[' opened at 4:29"},
		{"unterminated paren", head + "  %h = matmul(%x, %w\n  output %h\n}", "E_PARSE: e.tg:4:21: ", "expected ',' or ')'"},
		{"unterminated graph", head + "  output %x\n", "E_PARSE: e.tg:5:1: ", "missing '}' for the '{' opened at 1:9"},
		{"input after node", head + "  %h = matmul(%x, %w)\n  input %z: f32[1]\n  output %h\n}", "E_PARSE: e.tg:5:3: ", "inputs come first"},
		{"node after output", head + "  output %x\n  %h = relu(%x)\n}", "E_PARSE: e.tg:5:3: ", "outputs come last"},
		{"bare percent", head + "  % = relu(%x)\n}", "E_PARSE: e.tg:4:3: ", "value name after '%'"},
		{"digit value name", head + "  %1 = relu(%x)\n}", "E_PARSE: e.tg:4:3: ", "value name after '%'"},
		{"stray character", head + "  %h = relu(%x);\n}", "E_PARSE: e.tg:4:16: ", `unexpected character ";"`},
		{"non-ascii column", "graph e { # é\n  input %x: f32[4] é\n}", "E_PARSE: e.tg:2:20: ", `unexpected character "é"`},
		{"invalid utf-8", "graph e {\n  input %x: f32[4] # \xff\n}", "E_PARSE: e.tg:2:22: ", "not valid UTF-8"},
		{"bad statement", head + "  relu(%x)\n}", "E_PARSE: e.tg:4:3: ", "expected a statement"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := Parse(c.src, "e.tg")
			if err == nil {
				t.Fatalf("parsed without error:\n%s", Print(g))
			}
			msg := err.Error()
			var ce *errs.Error
			if !errors.As(err, &ce) || !strings.HasPrefix(msg, c.want) || !strings.Contains(msg, c.contains) || strings.Contains(msg, "\n") {
				t.Fatalf("got  %s\nwant %s...%s", msg, c.want, c.contains)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	big := strings.Repeat("#", MaxSourceBytes+1)
	if _, err := Parse(big, "big.tg"); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "big.tg: ") {
		t.Fatalf("oversized source: %v", err)
	}
	var b strings.Builder
	b.WriteString("graph many {\n input %v0: f32[1]\n")
	for i := 1; i <= MaxNodes+1; i++ {
		fmt.Fprintf(&b, " %%v%d = neg(%%v%d)\n", i, i-1)
	}
	b.WriteString(" output %v1\n}\n")
	_, err := Parse(b.String(), "many.tg")
	if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), fmt.Sprintf("many.tg:%d:2: ", MaxNodes+3)) {
		t.Fatalf("too many nodes: %v", err)
	}
}

// TestParseSurvivesInferencePanics: reshape's rule divides by a product of dims that wraps to
// 0 for these values. Whatever code that ends up as, Parse must return a positioned error.
func TestParseSurvivesInferencePanics(t *testing.T) {
	_, err := Parse("graph o {\n  input %x: f32[2]\n  %y = reshape(%x) {shape=[-1,4294967296,4294967296]}\n  output %y\n}", "o.tg")
	if err == nil || !strings.Contains(err.Error(), ": o.tg:3:3: ") {
		t.Fatalf("want a positioned error, got %v", err)
	}
}

func TestParseFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "g.tg")
	if err := os.WriteFile(path, []byte(specExample), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFile(path); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.tg")
	if err := os.WriteFile(bad, []byte("graph g {\n  output %x\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFile(bad); err == nil || !strings.HasPrefix(err.Error(), "E_PARSE: "+bad+":2:10: ") {
		t.Fatalf("errors must name the path: %v", err)
	}
	if _, err := ParseFile(filepath.Join(dir, "missing.tg")); errs.CodeOf(err) != errs.Input {
		t.Fatalf("missing file: %v", err)
	}
}
