package mesh

import (
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Layout says how one tensor is spread over a mesh. Dims[i] is "" when dim i is replicated
// (every rank holds all of it) or the mesh axis it is sharded over (the rank at coordinate c on
// that axis holds the c-th of Size equal blocks). Partial lists the axes over which the local
// values are addends of a pending sum: the tensor's value is the sum over those axes' groups.
// An axis appears at most once in Dims and Partial together. The zero Layout is a replicated
// scalar.
type Layout struct {
	Dims    []string
	Partial []string
}

// Replicated is the layout where every rank holds the whole tensor of the given rank.
func Replicated(rank int) Layout { return Layout{Dims: make([]string, rank)} }

// Sharded returns a layout of the given rank with dim sharded over axis.
func Sharded(rank, dim int, axis string) Layout {
	l := Replicated(rank)
	l.Dims[dim] = axis
	return l
}

// Rank is the number of dims the layout describes.
func (l Layout) Rank() int { return len(l.Dims) }

// Clone deep-copies the layout.
func (l Layout) Clone() Layout {
	return Layout{Dims: slices.Clone(l.Dims), Partial: slices.Clone(l.Partial)}
}

// Equal compares dims and partial axes (nil and empty Partial are equal).
func (l Layout) Equal(o Layout) bool {
	return slices.Equal(l.Dims, o.Dims) && len(l.Partial) == len(o.Partial) && slices.Equal(l.Partial, o.Partial)
}

// IsReplicated reports whether every rank holds the whole, final tensor.
func (l Layout) IsReplicated() bool {
	return len(l.Partial) == 0 && !slices.ContainsFunc(l.Dims, func(a string) bool { return a != "" })
}

// ShardedDim returns the dim sharded over axis, or -1.
func (l Layout) ShardedDim(axis string) int { return slices.Index(l.Dims, axis) }

// IsPartial reports whether the layout has a pending sum over axis.
func (l Layout) IsPartial(axis string) bool { return slices.Contains(l.Partial, axis) }

// Axes lists every axis the layout uses, sharded dims first (in dim order), then partial axes.
func (l Layout) Axes() []string {
	var out []string
	for _, a := range l.Dims {
		if a != "" {
			out = append(out, a)
		}
	}
	return append(out, l.Partial...)
}

// String renders the general form ParseLayout reads back: "[S(dp),R]", "[R,R]+P(tp)", "[]".
func (l Layout) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, a := range l.Dims {
		if i > 0 {
			b.WriteByte(',')
		}
		if a == "" {
			b.WriteByte('R')
		} else {
			b.WriteString("S(" + a + ")")
		}
	}
	b.WriteByte(']')
	if len(l.Partial) > 0 {
		b.WriteString("+P(" + strings.Join(l.Partial, ",") + ")")
	}
	return b.String()
}

// Validate checks the layout's own consistency: axis names are identifiers and no axis is used
// twice. It knows no mesh; Mesh.Check adds the mesh and the shape.
func (l Layout) Validate() error {
	seen := map[string]bool{}
	for _, a := range l.Axes() {
		if !ValidAxisName(a) {
			return errs.New(errs.Input, "layout %s: axis name %q is not an identifier", l, a)
		}
		if seen[a] {
			return errs.New(errs.Input, "layout %s uses mesh axis %s twice (an axis shards one dim or is partial, once)", l, a)
		}
		seen[a] = true
	}
	return nil
}

// MaxLayoutBytes bounds a layout string; nothing valid is longer (8 dims of S(32-byte axis)).
const MaxLayoutBytes = 1024

// ParseLayout reads one tensor's layout for a tensor of the given rank. Forms:
//
//	[S(dp),R]      per dim: R replicated, S(axis) sharded over axis ([] for a scalar)
//	R, rep         every dim replicated
//	col:tp         the last dim sharded over tp (a weight split by columns; a vector's only dim)
//	row:tp         the second-to-last dim sharded over tp (a matrix split by rows; rank >= 2)
//	P(tp)          every dim replicated, values pending a sum over tp
//
// and any of them followed by +P(axis,...) for pending sums: "[R,S(tp)]+P(dp)", "row:tp+P(dp)".
// Spaces between tokens are ignored. Errors are one E_PARSE line (E_SHAPE for a form that does
// not fit the rank) quoting the string.
func ParseLayout(s string, rank int) (Layout, error) {
	src := s
	if len(s) > MaxLayoutBytes {
		return Layout{}, errs.New(errs.Parse, "layout of %d bytes, limit %d", len(s), MaxLayoutBytes)
	}
	if rank < 0 || rank > 64 {
		return Layout{}, errs.New(errs.Shape, "layout %q for a tensor of rank %d", src, rank)
	}
	s = strings.Join(strings.Fields(s), "")
	fail := func(format string, args ...any) (Layout, error) {
		return Layout{}, errs.New(errs.Parse, "layout %q: %s (forms: [S(dp),R], R, col:tp, row:tp, P(tp), each with optional +P(axis,...))", src, sprintf(format, args...))
	}
	var l Layout
	base, partial, hasPartial := cutPartial(s)
	switch {
	case base == "":
		if !hasPartial {
			return fail("empty")
		}
		l = Replicated(rank) // "P(tp)" alone
	case base == "R" || base == "rep":
		l = Replicated(rank)
	case strings.HasPrefix(base, "col:"), strings.HasPrefix(base, "row:"):
		kind, axis := base[:3], base[4:]
		if !ValidAxisName(axis) {
			return fail("%s: axis %q is not an identifier", kind, axis)
		}
		dim := rank - 1
		if kind == "row" {
			dim = rank - 2
		}
		if dim < 0 {
			return Layout{}, errs.New(errs.Shape, "layout %q: %s sharding needs a tensor of rank >= %d, this one has rank %d", src, kind, rank-dim, rank)
		}
		l = Sharded(rank, dim, axis)
	case base[0] == '[':
		if base[len(base)-1] != ']' {
			return fail("missing ']'")
		}
		inner := base[1 : len(base)-1]
		l.Dims = []string{}
		if inner != "" {
			for i, p := range strings.Split(inner, ",") {
				switch {
				case p == "R":
					l.Dims = append(l.Dims, "")
				case strings.HasPrefix(p, "S(") && strings.HasSuffix(p, ")"):
					axis := p[2 : len(p)-1]
					if !ValidAxisName(axis) {
						return fail("dim %d: axis %q is not an identifier", i, axis)
					}
					l.Dims = append(l.Dims, axis)
				default:
					return fail("dim %d: %q is not R or S(axis)", i, p)
				}
			}
		}
		if len(l.Dims) != rank {
			return Layout{}, errs.New(errs.Shape, "layout %q describes %d dims, the tensor has rank %d", src, len(l.Dims), rank)
		}
	default:
		return fail("unknown form %q", base)
	}
	if hasPartial {
		if partial == "" {
			return fail("P() lists no axis")
		}
		for _, a := range strings.Split(partial, ",") {
			if !ValidAxisName(a) {
				return fail("partial axis %q is not an identifier", a)
			}
			l.Partial = append(l.Partial, a)
		}
	}
	if err := l.Validate(); err != nil {
		return Layout{}, errs.New(errs.Parse, "layout %q: %s", src, strings.TrimPrefix(err.Error(), string(errs.Input)+": "))
	}
	return l, nil
}

// cutPartial splits "base+P(a,b)" or "P(a,b)" into base and "a,b".
func cutPartial(s string) (base, partial string, ok bool) {
	i := strings.LastIndex(s, "P(")
	if i < 0 || !strings.HasSuffix(s, ")") {
		return s, "", false
	}
	switch {
	case i == 0:
		return "", s[2 : len(s)-1], true
	case s[i-1] == '+':
		return s[:i-1], s[i+2 : len(s)-1], true
	}
	return s, "", false
}

// ParseAssignment splits "W=col:tp" into the tensor name and the layout text.
func ParseAssignment(s string) (name, layout string, err error) {
	name, layout, ok := strings.Cut(s, "=")
	name, layout = strings.TrimSpace(name), strings.TrimSpace(layout)
	if !ok || name == "" || layout == "" {
		return "", "", errs.New(errs.Parse, "layout assignment %q is not NAME=LAYOUT (e.g. W=col:tp or X=[S(dp),R])", s)
	}
	return strings.TrimPrefix(name, "%"), layout, nil
}
