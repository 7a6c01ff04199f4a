package mesh

import (
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// Check verifies a layout for the named tensor of the given global shape on this mesh: the
// layout's rank matches, every axis exists, and every sharded dim divides evenly by its axis'
// size (equal blocks keep every rank's program the same: the engine does not pad shards).
func (m *Mesh) Check(tensor string, l Layout, global []int) error {
	if err := l.Validate(); err != nil {
		return errs.Wrap(errs.Input, err, "tensor %s", tensor)
	}
	if len(l.Dims) != len(global) {
		return errs.New(errs.Shape, "tensor %s: layout %s describes %d dims, the tensor %v has %d", tensor, l, len(l.Dims), global, len(global))
	}
	for _, a := range l.Axes() {
		if m.AxisIndex(a) < 0 {
			return errs.New(errs.Input, "tensor %s: layout %s names axis %s, which mesh %s does not have", tensor, l, a, m)
		}
	}
	for d, a := range l.Dims {
		if a != "" && global[d]%m.Size(a) != 0 {
			return errs.New(errs.Shape, "tensor %s: dim %d (size %d) is not divisible by mesh axis %s (size %d)", tensor, d, global[d], a, m.Size(a))
		}
	}
	return nil
}

// LocalShape is the shape every rank holds: each sharded dim divided by its axis' size.
func (m *Mesh) LocalShape(tensor string, l Layout, global []int) ([]int, error) {
	if err := m.Check(tensor, l, global); err != nil {
		return nil, err
	}
	out := slices.Clone(global)
	for d, a := range l.Dims {
		if a != "" {
			out[d] /= m.Size(a)
		}
	}
	return out, nil
}

// GlobalShape is the inverse of LocalShape: each sharded dim times its axis' size.
func (m *Mesh) GlobalShape(l Layout, local []int) []int {
	out := slices.Clone(local)
	for d, a := range l.Dims {
		if a != "" && d < len(out) {
			out[d] *= m.Size(a)
		}
	}
	return out
}

// Offset is where rank's block starts in the global tensor, per dim (0 on replicated dims).
// The layout must have passed Check for this shape.
func (m *Mesh) Offset(l Layout, global []int, rank int) []int {
	off := make([]int, len(global))
	for d, a := range l.Dims {
		if a != "" {
			off[d] = m.Coord(a, rank) * (global[d] / m.Size(a))
		}
	}
	return off
}

// Owners is how many ranks hold a copy of each block: the product of the sizes of the axes
// the layout neither shards over nor sums over. A sum over a replicated layout's ranks counts
// each value that many times.
func (m *Mesh) Owners(l Layout) int {
	n := 1
	used := l.Axes()
	for _, a := range m.Axes {
		if !slices.Contains(used, a.Name) {
			n *= a.Size
		}
	}
	return n
}
