package ptx

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
)

// streamPlan is a kernel the stream lowering (stream.go) runs: one or more streams, each a walk
// over a flat index space in which element i of every access sits at an offset fixed by i. An
// elementwise kernel is one stream (its loads, its arithmetic, its store); a movement kernel is
// one stream per tile.Copy (concat has one per input).
type streamPlan struct {
	streams []stream
	block   int // the Tile IR's elements per grid point
}

// stream is one index space of n elements and the instructions run for each element.
type stream struct {
	n   int
	ops []streamOp
}

// streamOp is one Tile IR instruction with the accesses it makes (Load, Store: one; Copy:
// From then To; arithmetic: none).
type streamOp struct {
	in  tile.Instr
	acc []streamAccess
}

// streamAccess is how the stream lowering reaches one Tile IR access. vec: element i sits at
// Base+i and Base is 16-byte aligned (buffers are 256-byte aligned, backend/cuda/alloc.go),
// so a run of elements starting at a multiple of the vector width is whole 16-byte accesses.
// run: several dims, the innermost contiguous, every other stride and Base 16-byte aligned
// (slices of rows, concat's destinations, a broadcast bias): a chunk that does not straddle
// an innermost row is one 16-byte-aligned run at the unravelled offset of its first element.
// Otherwise each element's offset is unravelled on its own (a gather, or a scatter for a store).
type streamAccess struct {
	a        tile.Access
	vec, run bool
}

// matchStream recognises the kernels lowerElementwise and lowerMovement (engine/compiler)
// emit: a 1-D grid of [1, block] tiles, grid point p covering elements p*block ... p*block+
// block-1 of the index space of every access, every access masked, every offset an access can
// reach inside its buffer (so no element needs the SIMT path's out-of-allocation NaN), no
// buffer both read and written. Then the grid points' order is free, and so is how elements are
// dealt to threads. Anything else (loops, reductions, 2-D tiles) is left to the SIMT path.
func matchStream(k *tile.Kernel, shapes []tile.Shape) *streamPlan {
	if len(k.Grid) != 1 || k.NumVars != 1 || len(k.Body) == 0 {
		return nil
	}
	plan := &streamPlan{block: -1}
	flat := func(a tile.Access) (streamAccess, int, bool) {
		if plan.block < 0 {
			plan.block = a.Cols
		}
		b := plan.block
		if a.Rows != 1 || a.Cols != b || b < 1 || prod(a.RowDims) != 1 || len(a.Base.Terms) != 0 || !a.Mask ||
			len(a.RowStart.Terms) != 0 || a.RowStart.Const != 0 || a.ColStart.Const != 0 ||
			len(a.ColStart.Terms) != 1 || a.ColStart.Terms[0].Var != 0 || a.ColStart.Terms[0].Coef != b ||
			len(a.ColDims) == 0 || len(a.ColDims) != len(a.ColStrides) || a.Param < 0 || a.Param >= len(k.Params) {
			return streamAccess{}, 0, false
		}
		p := k.Params[a.Param]
		n := prod(a.ColDims)
		lo, hi := a.Base.Const, a.Base.Const
		for i, d := range a.ColDims {
			if d < 1 {
				return streamAccess{}, 0, false
			}
			s := (d - 1) * a.ColStrides[i]
			lo, hi = lo+min(s, 0), hi+max(s, 0)
		}
		if lo < 0 || hi >= p.Len || n > maxIndex/2 || p.Len > maxIndex/2 || k.Grid[0]*b < n {
			return streamAccess{}, 0, false
		}
		size := p.DType.Size()
		aligned := a.Base.Const*size%16 == 0
		last := len(a.ColDims) - 1
		run := last > 0 && a.ColStrides[last] == 1 && aligned
		for _, st := range a.ColStrides[:last] {
			run = run && st*size%16 == 0
		}
		vec := last == 0 && a.ColStrides[0] == 1 && aligned
		return streamAccess{a: a, vec: vec, run: run}, n, true
	}
	read, written := map[int]bool{}, map[int]bool{}
	var elem *stream
	stores := 0
	for _, in := range k.Body {
		switch x := in.(type) {
		case tile.Copy:
			from, n, ok := flat(x.From)
			to, m, ok2 := flat(x.To)
			if !ok || !ok2 || n != m || k.Params[x.From.Param].DType != k.Params[x.To.Param].DType {
				return nil
			}
			plan.streams = append(plan.streams, stream{n: n, ops: []streamOp{{in: x, acc: []streamAccess{from, to}}}})
			read[x.From.Param], written[x.To.Param] = true, true
			continue
		case tile.Load:
			acc, n, ok := flat(x.At)
			if !ok || (elem != nil && elem.n >= 0 && n != elem.n) || shapes[x.Dst] != (tile.Shape{1, plan.block}) {
				return nil
			}
			elem = elemStream(elem)
			elem.n = n
			elem.ops = append(elem.ops, streamOp{in: x, acc: []streamAccess{acc}})
			read[x.At.Param] = true
			continue
		case tile.Store:
			acc, n, ok := flat(x.At)
			if !ok || (elem != nil && elem.n >= 0 && n != elem.n) || shapes[x.Src] != (tile.Shape{1, plan.block}) {
				return nil
			}
			elem = elemStream(elem)
			elem.n = n
			elem.ops = append(elem.ops, streamOp{in: x, acc: []streamAccess{acc}})
			written[x.At.Param] = true
			stores++
			continue
		case tile.Full:
			if x.Rows != 1 || (x.Cols != 1 && x.Cols != plan.block) {
				return nil
			}
		case tile.Unary, tile.Binary, tile.Round:
			// Operands are [1, block] or a [1, 1] constant; checked below once block is known.
		default:
			return nil
		}
		elem = elemStream(elem)
		elem.ops = append(elem.ops, streamOp{in: in})
	}
	for p := range written {
		if read[p] {
			return nil // in place: a thread's store could land before another thread's load
		}
	}
	if elem != nil {
		// One store, last: the lowering's elementwise form. Arithmetic works on [1, block]
		// tiles; only a Full may be [1, 1] (a constant broadcasts to every element).
		if len(plan.streams) > 0 || stores != 1 || elem.n < 0 {
			return nil
		}
		if _, ok := elem.ops[len(elem.ops)-1].in.(tile.Store); !ok {
			return nil
		}
		for _, op := range elem.ops {
			var dst tile.Reg
			switch x := op.in.(type) {
			case tile.Unary:
				dst = x.Dst
			case tile.Binary:
				dst = x.Dst
			case tile.Round:
				dst = x.Dst
			case tile.Full:
				if x.Cols != 1 && x.Cols != plan.block {
					return nil
				}
				continue
			default:
				continue
			}
			if shapes[dst] != (tile.Shape{1, plan.block}) {
				return nil
			}
		}
		plan.streams = []stream{*elem}
	}
	if len(plan.streams) == 0 {
		return nil
	}
	return plan
}

func elemStream(s *stream) *stream {
	if s == nil {
		return &stream{n: -1}
	}
	return s
}
