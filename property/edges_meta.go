package property

import (
	"math"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// shiftEdges is meta/softmax-shift's edge schedule (edges.go): its first draws are softmax and
// log_softmax on rows past the tile width with one tile lifted beyond exp's range, above the
// rest (the maximum in the last tile) or the first tile above, in each dtype of edgeDTypes.
var shiftEdges = func() []Edge {
	var out []Edge
	for _, p := range []EdgePattern{EdgeUp, EdgeDown} {
		for _, dt := range edgeDTypes {
			for _, op := range []string{"softmax", "log_softmax"} {
				if w, err := TileWidth(op, dt); err == nil {
					out = append(out, Edge{Op: op, DType: dt, Pattern: p, Width: w})
				}
			}
		}
	}
	return out
}()

// softmaxShiftDraws draws meta/softmax-shift's dtype, op, shape, axis, quantum 2^q and spread,
// and returns what to do to x before the shift: nothing past the edge schedule. An edge draw
// keeps the relation exact: x spreads over at most p-4 bits and the lifted tile adds 2^(p-3)
// quanta, so x + c (c within p-2 bits) stays below 2^(p-1) quanta, and the quantum is chosen so
// that 2^(p-3) quanta exceed ln of the accumulator's max (88.7 for f32, 709.8 for f64).
func softmaxShiftDraws(t *rapid.T, e Env) (dt numerics.DType, op string, shape []int, axis, q, spread int, lift func(*tensor.Tensor) *tensor.Tensor) {
	lift = func(x *tensor.Tensor) *tensor.Tensor { return x }
	if c := e.Config.edges; c != nil && c.cur < len(shiftEdges) {
		ed := shiftEdges[c.cur]
		dt, op = ed.DType, ed.Op
		p := mantissaBits(dt) + 1
		lo, hi := exponentRange(dt, p)
		span := math.Log(numerics.MaxFinite(numerics.F32))
		if dt == numerics.F64 {
			span = math.Log(numerics.MaxFinite(numerics.F64))
		}
		need := int(math.Ceil(math.Log2(span*1.15))) - (p - 3)
		q = rapid.IntRange(max(lo, need), max(hi, need)).Draw(t, "edge_quantum_exp")
		spread = rapid.IntRange(0, p-4).Draw(t, "edge_spread_bits")
		n := ed.Width + 1 + rapid.IntRange(0, ed.Width).Draw(t, "edge_len_past_tile")
		shape, axis = []int{1 + rapid.IntRange(0, 1).Draw(t, "edge_more_rows"), n}, 1
		ed.Len, ed.Shift = n, math.Ldexp(1, q+p-3)
		t.Logf("edge case: %s", ed)
		lift = func(x *tensor.Tensor) *tensor.Tensor {
			last := (n - 1) / ed.Width * ed.Width
			for j := range n { // row 0 only; a second row stays as drawn
				if (ed.Pattern == EdgeUp && j >= last) || (ed.Pattern == EdgeDown && j < ed.Width) {
					x.SetFloat64(j, x.Float64(j)+ed.Shift)
				}
			}
			return x
		}
		return
	}
	dt = drawDType(t, numerics.F32, numerics.F64, numerics.F16, numerics.BF16, numerics.F8E4M3, numerics.F8E5M2)
	op = rapid.SampledFrom([]string{"softmax", "log_softmax"}).Draw(t, "op")
	shape = drawDims(t, "dim", rapid.IntRange(1, 3).Draw(t, "rank"), e.Config.MaxElems)
	axis = rapid.IntRange(0, len(shape)-1).Draw(t, "axis")
	p := mantissaBits(dt) + 1
	lo, hi := exponentRange(dt, p)
	q = rapid.IntRange(lo, hi).Draw(t, "quantum_exp")
	spread = rapid.IntRange(0, p-2).Draw(t, "spread_bits")
	return
}
