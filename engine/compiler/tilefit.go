package compiler

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// SharedBudget is the most dynamic shared memory one CTA may use on sm_90 (227 KiB). The GPU's
// SIMT path keeps every tile register of a grid point there, so the default attention tiles
// shrink until an estimate of their peak fits it. The schedule stays one for every backend (the
// CPU runs the same tiles), so the CPU and GPU bits still agree.
const SharedBudget = 227 * 1024

// attnTiles halves the query block, then the key block, until live(bm, bn, d, dv) elements of
// the widest register size fit SharedBudget. The query block of the forward only groups
// independent rows, so shrinking it changes no bit; the key block regroups the online softmax
// and shrinks only where the query block alone cannot make room (head dims in the hundreds).
// The backward sums over the other block's axis either way, so it halves the larger first.
func attnTiles(bm, bn int, in []*graph.Value, rowsFirst bool, live func(bm, bn, d, dv int) int) (int, int) {
	q := in[0].Type
	d, dv := q.Shape[q.Rank()-1], q.Shape[q.Rank()-1]
	if len(in) > 2 { // attention_lse has no V
		v := in[2].Type
		dv = v.Shape[v.Rank()-1]
	}
	eb := 4 // f32 registers; f16/bf16 compute in them
	if q.DType == numerics.F64 {
		eb = 8
	}
	for eb*live(bm, bn, d, dv) > SharedBudget && (bm > 1 || bn > 1) {
		if bm > 1 && (rowsFirst || bm >= bn || bn == 1) {
			bm /= 2
		} else {
			bn /= 2
		}
	}
	return bm, bn
}

// attnLive bounds the forward's peak: either Q, K and the scores while QK^T runs, or the
// output, its update, V and the probabilities while PV runs (measured against the generator's
// layout on f64/f32/bf16 shapes up to head dim 1024: tilefit_test.go in engine/compiler/ptx).
func attnLive(bm, bn, d, dv int) int {
	return max(bm*d+bn*d, 2*bm*dv+bn*dv) + 2*bm*bn + 8*bm + 64
}

// attnGradLive bounds the backward's peak: about six operand-sized tiles (Q or K, V, O, dO and
// the gradient with its update) and four score-sized ones (S, P, dP, dS).
func attnGradLive(bm, bn, d, dv int) int {
	return 6*max(bm, bn)*max(d, dv) + 4*bm*bn + 16*max(bm, bn) + 64
}
