package graph

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// MaxSourceBytes caps the size of a graph text so a hostile file cannot exhaust memory.
const MaxSourceBytes = 16 << 20

// ParseFile reads and parses a graph text file; errors name the path.
func ParseFile(path string) (*Graph, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "read graph")
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxSourceBytes+1))
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "read graph %s", path)
	}
	return Parse(string(src), path)
}

// Parse parses one graph in the text format (docs/graph-format.md), infers every node's type,
// checks written types against the inferred ones and verifies the result. Every error is one
// coded line carrying filename:line:col.
func Parse(src, filename string) (*Graph, error) {
	if filename == "" {
		filename = "<input>"
	}
	if len(src) > MaxSourceBytes {
		return nil, errs.New(errs.Input, "%s: graph text is %d bytes, limit %d", filename, len(src), MaxSourceBytes)
	}
	if !utf8.ValidString(src) {
		bad := 0
		for bad < len(src) {
			r, n := utf8.DecodeRuneInString(src[bad:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			bad += n
		}
		l := newLexer(src, filename)
		l.advance(bad)
		return nil, l.errorf(l.line, l.col, "graph text is not valid UTF-8")
	}
	p := &parser{lx: newLexer(src, filename), file: filename, defs: map[string]token{}, vals: map[string]*Value{}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return p.graph()
}

type parser struct {
	lx   *lexer
	file string
	tok  token
	g    *Graph
	defs map[string]token // where each value was defined, for redefinition errors
	vals map[string]*Value
}

func (p *parser) advance() (err error) {
	p.tok, err = p.lx.next()
	return err
}

func (p *parser) pos(t token) string { return fmt.Sprintf("%s:%d:%d", p.file, t.line, t.col) }

func (p *parser) errAt(t token, code errs.Code, format string, args ...any) error {
	return errs.New(code, "%s: %s", p.pos(t), fmt.Sprintf(format, args...))
}

// wrapAt puts a position in front of a semantic error; a coded cause keeps its own code.
func (p *parser) wrapAt(t token, code errs.Code, err error) error {
	return errs.Wrap(code, err, "%s", p.pos(t))
}

// expect consumes the punctuation or keyword s, or reports what was found instead.
func (p *parser) expect(s, context string) error {
	if !p.tok.is(s) {
		return p.errAt(p.tok, errs.Parse, "expected '%s' %s, got %s", s, context, p.tok.describe())
	}
	return p.advance()
}

func (p *parser) skipBlank() error {
	for p.tok.kind == tNL {
		if err := p.advance(); err != nil {
			return err
		}
	}
	return nil
}

// Statements come in three phases: inputs, nodes, outputs.
const (
	phaseInputs = iota
	phaseNodes
	phaseOutputs
)

func (p *parser) graph() (*Graph, error) {
	if err := p.skipBlank(); err != nil {
		return nil, err
	}
	head := p.tok
	if !head.is("graph") || head.kind != tIdent {
		return nil, p.errAt(head, errs.Parse, "expected 'graph NAME {' to start the file, got %s", head.describe())
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tIdent {
		return nil, p.errAt(p.tok, errs.Parse, "expected a graph name after 'graph', got %s", p.tok.describe())
	}
	p.g = &Graph{Name: p.tok.text}
	if err := p.advance(); err != nil {
		return nil, err
	}
	open := p.tok
	if err := p.expect("{", "after the graph name"); err != nil {
		return nil, err
	}
	if err := p.endOfStatement("'{'"); err != nil {
		return nil, err
	}
	phase := phaseInputs
	for {
		if err := p.skipBlank(); err != nil {
			return nil, err
		}
		t := p.tok
		var err error
		switch {
		case t.kind == tEOF:
			return nil, p.errAt(t, errs.Parse, "unterminated graph %s: missing '}' for the '{' opened at %d:%d", p.g.Name, open.line, open.col)
		case t.is("}"):
			return p.finish(head)
		case t.kind == tIdent && t.text == "mesh":
			if phase != phaseInputs || len(p.g.Inputs) > 0 || p.g.Mesh != nil {
				return nil, p.errAt(t, errs.Parse, "a mesh line comes once, first in the graph (before inputs)")
			}
			err = p.meshLine()
		case t.kind == tIdent && t.text == "input":
			if phase != phaseInputs {
				return nil, p.errAt(t, errs.Parse, "input after a node or output: inputs come first")
			}
			err = p.input()
		case t.kind == tIdent && t.text == "output":
			phase = phaseOutputs
			err = p.output()
		case t.kind == tValue:
			if phase == phaseOutputs {
				return nil, p.errAt(t, errs.Parse, "node %%%s after an output line: outputs come last", t.text)
			}
			phase = phaseNodes
			err = p.node()
		default:
			return nil, p.errAt(t, errs.Parse, "expected a statement (input, %%name = op(...), output or '}'), got %s", t.describe())
		}
		if err != nil {
			return nil, err
		}
		if err := p.endOfStatement("a statement"); err != nil {
			return nil, err
		}
	}
}

// endOfStatement requires the line to end here (one statement per line).
func (p *parser) endOfStatement(after string) error {
	switch p.tok.kind {
	case tNL:
		return p.advance()
	case tEOF:
		return nil // the caller reports the missing '}'
	}
	return p.errAt(p.tok, errs.Parse, "unexpected %s after %s (one statement per line)", p.tok.describe(), after)
}

func (p *parser) finish(head token) (*Graph, error) {
	closing := p.tok
	if len(p.g.Outputs) == 0 {
		return nil, p.errAt(closing, errs.Parse, "graph %s has no output line (write 'output %%v, ...' before '}')", p.g.Name)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if err := p.skipBlank(); err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.errAt(p.tok, errs.Parse, "unexpected %s after the graph's closing '}' (one graph per file)", p.tok.describe())
	}
	if err := Verify(p.g); err != nil {
		return nil, p.wrapAt(head, errs.Input, err)
	}
	return p.g, nil
}

// fresh reports a value name that is already taken, and where it was first defined.
func (p *parser) fresh(t token) error {
	if first, dup := p.defs[t.text]; dup {
		return p.errAt(t, errs.Parse, "value %%%s is already defined at %d:%d", t.text, first.line, first.col)
	}
	return nil
}

// define records a value; the name was checked by fresh when its statement began.
func (p *parser) define(t token, v *Value) {
	p.defs[t.text] = t
	p.vals[t.text] = v
}

// use resolves the value token at p.tok.
func (p *parser) use(context string) (*Value, error) {
	t := p.tok
	if t.kind != tValue {
		return nil, p.errAt(t, errs.Parse, "expected a value (%%name) %s, got %s", context, t.describe())
	}
	v, ok := p.vals[t.text]
	if !ok {
		return nil, p.errAt(t, errs.Parse, "value %%%s is not defined (define values before using them)", t.text)
	}
	return v, p.advance()
}

// meshLine: "mesh" axis "=" int {"," axis "=" int}. The axes are checked by mesh.New, whose
// coded error keeps its code behind the position.
func (p *parser) meshLine() error {
	start := p.tok
	if err := p.advance(); err != nil {
		return err
	}
	var axes []mesh.Axis
	for {
		name := p.tok
		if name.kind != tIdent {
			return p.errAt(name, errs.Parse, "expected a mesh axis name (mesh dp=2,tp=2), got %s", name.describe())
		}
		if err := p.advance(); err != nil {
			return err
		}
		if err := p.expect("=", "and a size after mesh axis "+name.text); err != nil {
			return err
		}
		if p.tok.kind != tInt {
			return p.errAt(p.tok, errs.Parse, "expected the size of mesh axis %s (an integer), got %s", name.text, p.tok.describe())
		}
		size, err := strconv.Atoi(p.tok.text)
		if err != nil || size < 1 {
			return p.errAt(p.tok, errs.Parse, "mesh axis %s has size %s, want an integer 1..%d", name.text, p.tok.text, mesh.MaxWorld)
		}
		axes = append(axes, mesh.Axis{Name: name.text, Size: size})
		if len(axes) > mesh.MaxAxes {
			return p.errAt(name, errs.Input, "mesh has more than %d axes", mesh.MaxAxes)
		}
		if err := p.advance(); err != nil {
			return err
		}
		if !p.tok.is(",") {
			break
		}
		if err := p.advance(); err != nil {
			return err
		}
	}
	m, err := mesh.New(axes, nil)
	if err != nil {
		return p.wrapAt(start, errs.Input, err)
	}
	p.g.Mesh = m
	return nil
}

// input: "input" %name ":" type
func (p *parser) input() error {
	if err := p.advance(); err != nil {
		return err
	}
	nameTok := p.tok
	if nameTok.kind != tValue {
		return p.errAt(nameTok, errs.Parse, "expected a value (%%name) after 'input', got %s", nameTok.describe())
	}
	if err := p.fresh(nameTok); err != nil {
		return err
	}
	if err := p.advance(); err != nil {
		return err
	}
	if err := p.expect(":", "and a type after input %"+nameTok.text); err != nil {
		return err
	}
	typ, err := p.typ()
	if err != nil {
		return err
	}
	v := &Value{Name: nameTok.text, Type: typ}
	p.define(nameTok, v)
	p.g.Inputs = append(p.g.Inputs, v)
	return nil
}

// output: "output" %v {"," %v}
func (p *parser) output() error {
	if err := p.advance(); err != nil {
		return err
	}
	for {
		v, err := p.use("in the output list")
		if err != nil {
			return err
		}
		p.g.Outputs = append(p.g.Outputs, v)
		if !p.tok.is(",") {
			return nil
		}
		if err := p.advance(); err != nil {
			return err
		}
	}
}

// typ: dtype "[" [int {"," int}] "]", checked against CheckType's limits.
func (p *parser) typ() (Type, error) {
	start := p.tok
	if start.kind != tIdent {
		return Type{}, p.errAt(start, errs.Parse, "expected a type such as f32[4,8], got %s", start.describe())
	}
	dt, err := numerics.Parse(start.text)
	if err != nil {
		return Type{}, p.wrapAt(start, errs.DType, err)
	}
	if err := p.advance(); err != nil {
		return Type{}, err
	}
	if err := p.expect("[", "after dtype "+start.text+" (a scalar is "+start.text+"[])"); err != nil {
		return Type{}, err
	}
	shape := []int{}
	for !p.tok.is("]") {
		if len(shape) > 0 {
			if err := p.expect(",", "or ']' in the shape"); err != nil {
				return Type{}, err
			}
		}
		if p.tok.kind != tInt {
			return Type{}, p.errAt(p.tok, errs.Parse, "expected a dim (an integer) in the shape, got %s", p.tok.describe())
		}
		d, err := strconv.Atoi(p.tok.text)
		if err != nil {
			return Type{}, p.errAt(p.tok, errs.Shape, "dim %s is out of range", p.tok.text)
		}
		if len(shape) == MaxRank {
			return Type{}, p.errAt(start, errs.Shape, "rank exceeds %d", MaxRank)
		}
		shape = append(shape, d)
		if err := p.advance(); err != nil {
			return Type{}, err
		}
	}
	if err := p.advance(); err != nil {
		return Type{}, err
	}
	t := Type{DType: dt, Shape: shape}
	if err := checkType(t); err != nil {
		return Type{}, p.wrapAt(start, errs.Shape, err)
	}
	return t, nil
}

// node: %name [":" type] "=" op "(" [%v {"," %v}] ")" ["{" attrs "}"]
func (p *parser) node() error {
	nameTok := p.tok
	if len(p.g.Nodes) == MaxNodes {
		return p.errAt(nameTok, errs.Input, "graph %s has more than %d nodes", p.g.Name, MaxNodes)
	}
	if err := p.fresh(nameTok); err != nil {
		return err
	}
	if err := p.advance(); err != nil {
		return err
	}
	var written *Type
	var typeTok token
	if p.tok.is(":") {
		if err := p.advance(); err != nil {
			return err
		}
		typeTok = p.tok
		t, err := p.typ()
		if err != nil {
			return err
		}
		written = &t
	}
	if err := p.expect("=", "after %"+nameTok.text); err != nil {
		return err
	}
	opTok := p.tok
	if opTok.kind != tIdent {
		return p.errAt(opTok, errs.Parse, "expected an op name after '=', got %s", opTok.describe())
	}
	def, ok := Lookup(opTok.text)
	if !ok {
		return p.errAt(opTok, errs.Unsupported, "unknown op %q (see `tessera-qa ops`)", opTok.text)
	}
	if err := p.advance(); err != nil {
		return err
	}
	if err := p.expect("(", "after op "+def.Name); err != nil {
		return err
	}
	n := &Node{Op: def.Name, Output: &Value{Name: nameTok.text}}
	for !p.tok.is(")") {
		if len(n.Inputs) > 0 {
			if err := p.expect(",", "or ')' in the inputs of "+def.Name); err != nil {
				return err
			}
		}
		v, err := p.use("as an input of " + def.Name)
		if err != nil {
			return err
		}
		n.Inputs = append(n.Inputs, v)
	}
	if err := p.advance(); err != nil {
		return err
	}
	if p.tok.is("{") {
		attrs, err := p.attrs(def)
		if err != nil {
			return err
		}
		n.Attrs = attrs
	}
	t, err := inferGuarded(n, p.g.Mesh)
	if err != nil {
		return p.wrapAt(nameTok, errs.Shape, err)
	}
	if err := checkType(t); err != nil {
		return errs.Wrap(errs.Shape, err, "%s: node %%%s: %s infers %s", p.pos(nameTok), nameTok.text, def.Name, t)
	}
	if written != nil && !written.Equal(t) {
		code := errs.Shape
		if written.DType != t.DType {
			code = errs.DType
		}
		return p.errAt(typeTok, code, "node %%%s is written %s but %s infers %s", nameTok.text, *written, def.Name, t)
	}
	n.Output.Type = t
	p.define(nameTok, n.Output)
	p.g.Nodes = append(p.g.Nodes, n)
	return nil
}

// inferGuarded turns a panic inside an op's shape rule into a coded error, so a bug there
// (say an overflow on absurd attribute values) cannot crash a tool that reads user files.
// The fuzz target rejects E_INTERNAL, so such bugs are still found.
func inferGuarded(n *Node, m *mesh.Mesh) (t Type, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errs.New(errs.Internal, "%s: shape rule of %s panicked: %v", nodeRef(n), n.Op, r)
		}
	}()
	return InferNodeIn(n, m)
}

// checkType is CheckType plus a bound on each dim first: CheckType's running product is an int
// and wraps for dims near 2^63 (3 * 6148914691236517206 wraps to 2), which would let an absurd
// shape through. Every type the parser accepts, written or inferred, passes here.
func checkType(t Type) error {
	for _, d := range t.Shape {
		if d > MaxElements {
			return errs.New(errs.Shape, "dim %d in %v exceeds %d elements", d, t.Shape, MaxElements)
		}
	}
	return CheckType(t)
}
