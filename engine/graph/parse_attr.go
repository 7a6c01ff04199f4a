package graph

import (
	"math"
	"strconv"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Attribute lists and literals of the text format (docs/graph-format.md, "Attributes").

// attrs: "{" [key "=" literal {"," key "=" literal}] "}"
func (p *parser) attrs(def *OpDef) (Attrs, error) {
	open := p.tok
	if err := p.advance(); err != nil {
		return nil, err
	}
	var out Attrs
	for !p.tok.is("}") {
		if p.tok.kind == tNL || p.tok.kind == tEOF {
			return nil, p.errAt(p.tok, errs.Parse, "unterminated '{' opened at %d:%d: attributes end with '}' on the same line", open.line, open.col)
		}
		if len(out) > 0 {
			if err := p.expect(",", "or '}' between attributes of "+def.Name); err != nil {
				return nil, err
			}
		}
		key := p.tok
		if key.kind != tIdent {
			return nil, p.errAt(key, errs.Parse, "expected an attribute name, got %s", key.describe())
		}
		if _, dup := out[key.text]; dup {
			return nil, p.errAt(key, errs.Parse, "attribute %s is given twice", key.text)
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if err := p.expect("=", "after attribute "+key.text); err != nil {
			return nil, err
		}
		a, err := p.literal(def, key.text)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = Attrs{}
		}
		out[key.text] = a
	}
	return out, p.advance()
}

// literal parses one attribute value. The literal's own syntax decides its kind; the op's
// spec is consulted only to turn an int literal into a float (eps=1) and to word errors.
func (p *parser) literal(def *OpDef, key string) (Attr, error) {
	t := p.tok
	spec := def.attrSpec(key)
	var a Attr
	switch t.kind {
	case tInt:
		v, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return Attr{}, p.errAt(t, errs.Parse, "integer %s is out of range for int64", t.text)
		}
		a = Int(v)
		if spec != nil && spec.Kind == AttrFloat {
			a = Float(float64(v))
		}
	case tFloat:
		f, err := parseFloat(t.text)
		if err != nil {
			return Attr{}, p.errAt(t, errs.Parse, "float %s is out of range for f64", t.text)
		}
		a = Float(f)
	case tString:
		a = String(t.text)
	case tIdent:
		switch t.text {
		case "true", "false":
			a = Bool(t.text == "true")
		case "inf":
			a = Float(math.Inf(1))
		case "nan":
			a = Float(math.NaN())
		default:
			dt, err := numerics.Parse(t.text)
			switch {
			case err == nil:
				a = DTypeAttr(dt)
			case spec != nil && spec.Kind == AttrDType:
				return Attr{}, p.wrapAt(t, errs.DType, err)
			case spec != nil && spec.Kind == AttrString:
				return Attr{}, p.errAt(t, errs.Parse, "bad value %s for attribute %s: strings need quotes (%s=%q)", t.text, key, key, t.text)
			default:
				return Attr{}, p.errAt(t, errs.Parse, "bad value %s for attribute %s: not a number, bool, dtype, string or int list", t.text, key)
			}
		}
	case tPunct:
		if t.text == "[" {
			return p.intList(key)
		}
		fallthrough
	default:
		return Attr{}, p.errAt(t, errs.Parse, "expected a value for attribute %s, got %s", key, t.describe())
	}
	return a, p.advance()
}

// intList: "[" [int {"," int}] "]". An empty list yields nil Ints, exactly what graph.Ints()
// builds in Go, so printed Go graphs read back with the same meaning.
func (p *parser) intList(key string) (Attr, error) {
	open := p.tok
	if err := p.advance(); err != nil {
		return Attr{}, err
	}
	var vs []int64
	for !p.tok.is("]") {
		if p.tok.kind == tNL || p.tok.kind == tEOF {
			return Attr{}, p.errAt(p.tok, errs.Parse, "unterminated '[' opened at %d:%d", open.line, open.col)
		}
		if len(vs) > 0 {
			if err := p.expect(",", "or ']' in the list of "+key); err != nil {
				return Attr{}, err
			}
		}
		if p.tok.kind != tInt {
			return Attr{}, p.errAt(p.tok, errs.Parse, "list attribute %s holds integers only, got %s", key, p.tok.describe())
		}
		v, err := strconv.ParseInt(p.tok.text, 10, 64)
		if err != nil {
			return Attr{}, p.errAt(p.tok, errs.Parse, "integer %s is out of range for int64", p.tok.text)
		}
		vs = append(vs, v)
		if err := p.advance(); err != nil {
			return Attr{}, err
		}
	}
	return Ints(vs...), p.advance()
}

func parseFloat(s string) (float64, error) {
	if s == "-inf" {
		return math.Inf(-1), nil
	}
	return strconv.ParseFloat(s, 64)
}
