package graph

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// AttrKind is the type of an attribute value.
type AttrKind uint8

const (
	AttrInt AttrKind = iota + 1
	AttrFloat
	AttrBool
	AttrInts
	AttrString
	AttrDType
)

var attrKindNames = [...]string{AttrInt: "int", AttrFloat: "float", AttrBool: "bool", AttrInts: "ints", AttrString: "string", AttrDType: "dtype"}

func (k AttrKind) String() string {
	if int(k) < len(attrKindNames) && k > 0 {
		return attrKindNames[k]
	}
	return fmt.Sprintf("attrkind(%d)", uint8(k))
}

// Attr is one attribute value; Kind says which field is meaningful.
type Attr struct {
	Kind  AttrKind
	Int   int64
	Float float64
	Bool  bool
	Ints  []int64
	Str   string
	DType numerics.DType
}

func Int(v int64) Attr                { return Attr{Kind: AttrInt, Int: v} }
func Float(v float64) Attr            { return Attr{Kind: AttrFloat, Float: v} }
func Bool(v bool) Attr                { return Attr{Kind: AttrBool, Bool: v} }
func Ints(v ...int64) Attr            { return Attr{Kind: AttrInts, Ints: v} }
func String(v string) Attr            { return Attr{Kind: AttrString, Str: v} }
func DTypeAttr(v numerics.DType) Attr { return Attr{Kind: AttrDType, DType: v} }

// Equal compares attributes exactly (floats by bits, so NaN == NaN and -0 != +0).
func (a Attr) Equal(b Attr) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case AttrInt:
		return a.Int == b.Int
	case AttrFloat:
		return floatBits(a.Float) == floatBits(b.Float)
	case AttrBool:
		return a.Bool == b.Bool
	case AttrInts:
		return slices.Equal(a.Ints, b.Ints)
	case AttrString:
		return a.Str == b.Str
	case AttrDType:
		return a.DType == b.DType
	}
	return false
}

// Attrs maps attribute names to values. Absent attributes take the op's declared default.
type Attrs map[string]Attr

// Clone deep-copies the map.
func (a Attrs) Clone() Attrs {
	if a == nil {
		return nil
	}
	c := maps.Clone(a)
	for k, v := range c {
		if v.Ints != nil {
			v.Ints = slices.Clone(v.Ints)
			c[k] = v
		}
	}
	return c
}

// Names returns the attribute names sorted, the order the printer uses.
func (a Attrs) Names() []string { return slices.Sorted(maps.Keys(a)) }

// attr returns the node's attribute or its op's default; ok is false if neither exists.
func (n *Node) attr(name string) (Attr, bool) {
	if a, ok := n.Attrs[name]; ok {
		return a, true
	}
	if d := n.Def(); d != nil {
		for _, s := range d.Attrs {
			if s.Name == name && s.Default != nil {
				return *s.Default, true
			}
		}
	}
	return Attr{}, false
}

// IntAttr, FloatAttr, ... read an attribute with the op's default applied. Verify guarantees
// kinds, so after verification these never see a wrong kind.
func (n *Node) IntAttr(name string) int64     { a, _ := n.attr(name); return a.Int }
func (n *Node) FloatAttr(name string) float64 { a, _ := n.attr(name); return a.Float }
func (n *Node) BoolAttr(name string) bool     { a, _ := n.attr(name); return a.Bool }
func (n *Node) StringAttr(name string) string {
	a, _ := n.attr(name)
	if d := n.Def(); d != nil {
		if s := d.attrSpec(name); s != nil {
			if v, ok := s.Aliases[a.Str]; ok {
				return v // an accepted spelling reads as the value it means
			}
		}
	}
	return a.Str
}
func (n *Node) DTypeAttr(name string) numerics.DType {
	a, _ := n.attr(name)
	return a.DType
}

// IntsAttr returns the list attribute as ints, or nil when absent and without default.
func (n *Node) IntsAttr(name string) []int {
	a, ok := n.attr(name)
	if !ok || a.Ints == nil {
		return nil
	}
	out := make([]int, len(a.Ints))
	for i, v := range a.Ints {
		out[i] = int(v)
	}
	return out
}

// HasAttr reports whether the attribute is set explicitly or has a default.
func (n *Node) HasAttr(name string) bool { _, ok := n.attr(name); return ok }

func floatBits(f float64) uint64 { return math.Float64bits(f) }

// HasAttrSet reports whether the attribute is written on the node (not just defaulted).
func (n *Node) HasAttrSet(name string) bool { _, ok := n.Attrs[name]; return ok }
