package dtensor

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// span describes t as outer x dim x inner around one dim, inner in bytes.
func span(t *tensor.Tensor, dim int) (outer, size, inner int) {
	outer = tensor.NumElems(t.Shape[:dim])
	inner = tensor.NumElems(t.Shape[dim+1:]) * t.DType.Size()
	return outer, t.Shape[dim], inner
}

// Block returns block k of n equal blocks of t along dim (a copy).
func Block(t *tensor.Tensor, dim, k, n int) *tensor.Tensor {
	outer, size, inner := span(t, dim)
	w := size / n
	shape := slices.Clone(t.Shape)
	shape[dim] = w
	out := tensor.New(t.DType, shape)
	pos := 0
	for o := range outer {
		src := (o*size + k*w) * inner
		pos += copy(out.Data[pos:], t.Data[src:src+w*inner])
	}
	return out
}

// packBlocks lays t's n blocks along dim back to back, block j first at j*len/n: the send
// buffer of reduce_scatter and all_to_all, which hand chunk j to member j.
func packBlocks(t *tensor.Tensor, dim, n int) []byte {
	out := make([]byte, 0, len(t.Data))
	for j := range n {
		out = append(out, Block(t, dim, j, n).Data...)
	}
	return out
}

// joinBlocks is packBlocks' inverse: buf holds n blocks of shape `part` back to back; the
// result joins them along dim in order.
func joinBlocks(buf []byte, dt numerics.DType, part []int, dim, n int) *tensor.Tensor {
	shape := slices.Clone(part)
	shape[dim] *= n
	out := tensor.New(dt, shape)
	outer, w, inner := span(&tensor.Tensor{DType: dt, Shape: part}, dim)
	blockBytes := len(buf) / n
	for j := range n {
		for o := range outer {
			src := j*blockBytes + o*w*inner
			dst := (o*w*n + j*w) * inner
			copy(out.Data[dst:dst+w*inner], buf[src:src+w*inner])
		}
	}
	return out
}

// Shard returns rank's block of the global tensor under layout l. For a layout with pending
// sums the rank at coordinate 0 on every partial axis holds the value and the others hold
// zeros, so the sum over those axes is the tensor.
func Shard(m *mesh.Mesh, name string, l mesh.Layout, global *tensor.Tensor, rank int) (*tensor.Tensor, error) {
	if err := m.Check(name, l, global.Shape); err != nil {
		return nil, err
	}
	if rank < 0 || rank >= m.World() {
		return nil, errs.New(errs.Input, "tensor %s: rank %d outside mesh %s of %d ranks", name, rank, m, m.World())
	}
	out := global
	for d, a := range l.Dims {
		if a != "" {
			out = Block(out, d, m.Coord(a, rank), m.Size(a))
		}
	}
	if out == global {
		out = global.Clone()
	}
	for _, a := range l.Partial {
		if m.Coord(a, rank) != 0 {
			return tensor.New(out.DType, out.Shape), nil
		}
	}
	return out, nil
}

// Assemble rebuilds the global tensor from every rank's block (locals[r] is rank r's). Ranks
// that hold the same block (replicas) must hold the same bits: a difference is E_DESYNC naming
// the ranks. Pending sums are added in float64 over the partial axes' coordinates in order and
// rounded once (integers in int64, wrapped once); Assemble is a checker's tool, not a
// collective.
func Assemble(m *mesh.Mesh, name string, l mesh.Layout, locals []*tensor.Tensor) (*tensor.Tensor, error) {
	if len(locals) != m.World() {
		return nil, errs.New(errs.Input, "tensor %s: %d blocks for mesh %s of %d ranks", name, len(locals), m, m.World())
	}
	for r, t := range locals {
		if t == nil || !slices.Equal(t.Shape, locals[0].Shape) || t.DType != locals[0].DType {
			return nil, errs.New(errs.Shape, "tensor %s: rank %d's block differs in type from rank 0's %s", name, r, locals[0].TypeString())
		}
	}
	global := m.GlobalShape(l, locals[0].Shape)
	if err := m.Check(name, l, global); err != nil {
		return nil, err
	}
	// Replicas: ranks whose coordinates differ only on axes the layout does not use.
	first := map[string]int{}
	for r := range m.World() {
		key := blockKey(m, l, r, true)
		if q, ok := first[key]; !ok {
			first[key] = r
		} else if !bytes.Equal(locals[q].Data, locals[r].Data) {
			return nil, errs.New(errs.Desync, "tensor %s: ranks %d and %d hold the same block of layout %s with different bits", name, q, r, l)
		}
	}
	// Sum the addends of each block.
	blocks := map[string]*tensor.Tensor{}
	for r := range m.World() {
		key := blockKey(m, l, r, false)
		if _, done := blocks[key]; done || m.Rank(zeroPartial(m, l, r)) != r {
			continue
		}
		var addends []*tensor.Tensor
		for _, q := range partialGroup(m, l, r) {
			addends = append(addends, locals[q])
		}
		blocks[key] = sum(addends)
	}
	out := tensor.New(locals[0].DType, global)
	for r := range m.World() {
		key := blockKey(m, l, r, false)
		b, ok := blocks[key]
		if !ok {
			continue
		}
		place(out, b, m.Offset(l, global, r))
		delete(blocks, key)
	}
	return out, nil
}

// blockKey names the block a rank holds: its coordinates on sharded axes, and with
// withPartial also on partial axes (which addend it holds).
func blockKey(m *mesh.Mesh, l mesh.Layout, r int, withPartial bool) string {
	c := m.Coords(r)
	key := ""
	for i, a := range m.Axes {
		if l.ShardedDim(a.Name) >= 0 || (withPartial && l.IsPartial(a.Name)) {
			key += fmt.Sprintf("%s=%d;", a.Name, c[i])
		}
	}
	return key
}

// zeroPartial returns r's coordinates with every partial axis set to 0.
func zeroPartial(m *mesh.Mesh, l mesh.Layout, r int) []int {
	c := m.Coords(r)
	for i, a := range m.Axes {
		if l.IsPartial(a.Name) {
			c[i] = 0
		}
	}
	return c
}

// partialGroup lists the ranks holding the addends of r's block, in row-major order of the
// partial axes' coordinates.
func partialGroup(m *mesh.Mesh, l mesh.Layout, r int) []int {
	out := []int{r}
	for _, a := range l.Partial {
		var next []int
		for _, q := range out {
			next = append(next, m.Group(a, q)...)
		}
		out = next
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sum adds tensors elementwise in order, in float64 (int64 for integers), rounding once.
func sum(ts []*tensor.Tensor) *tensor.Tensor {
	if len(ts) == 1 {
		return ts[0].Clone()
	}
	out := tensor.New(ts[0].DType, ts[0].Shape)
	if ts[0].DType.IsFloat() {
		acc := make([]float64, out.Len())
		for _, t := range ts {
			for i, v := range t.Float64s() {
				acc[i] += v
			}
		}
		for i, v := range acc {
			out.SetFloat64(i, v)
		}
		return out
	}
	for i := range out.Len() {
		var acc uint64
		for _, t := range ts {
			acc += signExtend(t, i)
		}
		out.SetBits(i, acc&mask(out))
	}
	return out
}

func signExtend(t *tensor.Tensor, i int) uint64 {
	b := t.Bits(i)
	bits := uint(t.DType.Size() * 8)
	if bits < 64 && b&(1<<(bits-1)) != 0 {
		b |= ^uint64(0) << bits
	}
	return b
}

func mask(t *tensor.Tensor) uint64 {
	bits := uint(t.DType.Size() * 8)
	if bits >= 64 {
		return ^uint64(0)
	}
	return 1<<bits - 1
}

// place copies block b into out at offset off (row by row along the last dim).
func place(out, b *tensor.Tensor, off []int) {
	size := out.DType.Size()
	if len(out.Shape) == 0 {
		copy(out.Data, b.Data)
		return
	}
	last := len(out.Shape) - 1
	row := b.Shape[last] * size
	rows := tensor.NumElems(b.Shape[:last])
	ostr := tensor.Strides(out.Shape)
	for i := range rows {
		// Coordinates of row i in b, then the flat offset in out.
		rem, dst := i, off[last]*ostr[last]
		for d := last - 1; d >= 0; d-- {
			c := rem % b.Shape[d]
			rem /= b.Shape[d]
			dst += (c + off[d]) * ostr[d]
		}
		copy(out.Data[dst*size:dst*size+row], b.Data[i*row:(i+1)*row])
	}
}
