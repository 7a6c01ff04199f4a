package property

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Row kernels carry state from one column tile of a row to the next (softmax's running max
// and rescaled sum, attention's rescaled output, the norms' partial sums). What breaks such
// state shows only on rows longer than one tile whose tiles differ by more than the
// accumulator's exponent range, or that hold -Inf or one value throughout. This file finds the
// tile widths from the compiler's own schedule and recognises such inputs (TileExtremes); the
// generator's edge schedule (edges.go) makes them.

// tiledOps are the ops whose kernels walk a row in tiles with running state, in schedule order.
var tiledOps = []string{"softmax", "log_softmax", "layernorm", "rmsnorm", "attention", "attention_lse", "attention_grad"}

var tileWidths sync.Map // op/dtype -> int

// TileWidth is the number of columns (keys, for attention) one loop step of op's kernel covers
// on a long row of dtype dt, read from the schedule the compiler gives a one-node graph.
func TileWidth(op string, dt numerics.DType) (int, error) {
	key := op + "/" + dt.String()
	if w, ok := tileWidths.Load(key); ok {
		return w.(int), nil
	}
	const long = 4096
	b := graph.NewBuilder("tile_width")
	kind := "rowwise"
	switch op {
	case "softmax", "log_softmax":
		b.Output(b.Op(op, graph.Attrs{"axis": graph.Int(-1)}, b.Input("x", dt, 2, long)))
	case "layernorm":
		b.Output(b.Op(op, nil, b.Input("x", dt, 2, long), b.Input("g", dt, long), b.Input("b", dt, long)))
	case "rmsnorm":
		b.Output(b.Op(op, nil, b.Input("x", dt, 2, long), b.Input("g", dt, long)))
	case "attention", "attention_lse", "attention_grad":
		kind = "attention"
		q, k := b.Input("q", dt, 4, 8), b.Input("k", dt, long, 8)
		if op == "attention_lse" {
			kind = "attention_grad" // its kernel is the backward's statistics sweep
			b.Output(b.Op(op, nil, q, k))
			break
		}
		v := b.Input("v", dt, long, 8)
		o := b.Op("attention", nil, q, k, v)
		if op == "attention" {
			b.Output(o)
			break
		}
		kind = "attention_grad"
		b.Output(b.Op(op, graph.Attrs{"wrt": graph.String("q")}, q, k, v, o, b.Input("do", dt, 4, 8), b.Op("attention_lse", nil, q, k)))
	default:
		return 0, fmt.Errorf("prop: no tiled row kernel for %s", op)
	}
	g, err := b.Build()
	if err != nil {
		return 0, fmt.Errorf("prop: tile width of %s/%s: %w", op, dt, err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		return 0, fmt.Errorf("prop: tile width of %s/%s: %w", op, dt, err)
	}
	for _, s := range p.Schedules {
		if s.Kind == kind && s.BN < long {
			tileWidths.Store(key, s.BN)
			return s.BN, nil
		}
	}
	return 0, fmt.Errorf("prop: no %s schedule tiles a row of %d for %s/%s", kind, long, op, dt)
}

// Tile-crossing extremes TileExtremes recognises.
const (
	ExtremeUp     = "later-tile-above" // a later tile's maximum exceeds every earlier one by more than the accumulator's exp range
	ExtremeDown   = "first-tile-above" // an earlier tile's maximum exceeds a later tile's by that much
	ExtremeMasked = "masked"           // -Inf entries in a row longer than a tile
	ExtremeEqual  = "all-equal"        // a row longer than a tile with one value throughout
)

// expRange is ln of the largest finite value of the accumulator a row op on dt computes in:
// two logits farther apart than this overflow or underflow exp between tiles. Attention on f16
// and bf16 rounds its probabilities to the storage dtype before P·V, so there the storage's
// range counts (ln 65504 = 11.1 for f16).
func expRange(n *graph.Node) float64 {
	dt := n.Inputs[0].Type.DType
	acc := numerics.F32
	if dt == numerics.F64 {
		acc = numerics.F64
	}
	if n.HasAttrSet("accum") {
		acc = n.DTypeAttr("accum")
	}
	r := math.Log(numerics.MaxFinite(acc))
	if strings.HasPrefix(n.Op, "attention") && (dt == numerics.F16 || dt == numerics.BF16) {
		r = min(r, math.Log(numerics.MaxFinite(dt)))
	}
	return r
}

// TileExtremes lists which tile-crossing extremes (Extreme*) the inputs of c's row ops hold:
// per row longer than the op's tile width, the maxima of its tiles (attention: of the scores
// q·k^T·scale of one key tile), -Inf entries, and rows of one value.
func TileExtremes(c *Case) []string {
	var out []string
	for _, k := range []string{ExtremeUp, ExtremeDown, ExtremeMasked, ExtremeEqual} {
		for _, m := range TileExtremesByOp(c) {
			if strings.HasSuffix(m, "/"+k) {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// TileExtremesByOp is TileExtremes per op: "softmax/later-tile-above", ..., sorted.
func TileExtremesByOp(c *Case) []string {
	vals := map[*graph.Value]*tensor.Tensor{}
	for _, v := range c.Graph.Inputs {
		vals[v] = c.Inputs[v.Name]
	}
	met := map[string]bool{}
	for _, n := range c.Graph.Nodes {
		in := make([]*tensor.Tensor, len(n.Inputs))
		for i, v := range n.Inputs {
			in[i] = vals[v]
		}
		out, err := ref.Eval(n, in)
		if err != nil {
			return nil
		}
		vals[n.Output] = out
		if !isTiled(n.Op) || !n.Inputs[0].Type.DType.IsFloat() {
			continue
		}
		w, err := TileWidth(n.Op, n.Inputs[0].Type.DType)
		if err != nil {
			continue
		}
		kinds := map[string]bool{}
		for _, row := range tiledRows(n, in) {
			classify(row, w, expRange(n), kinds)
		}
		for k := range kinds {
			met[n.Op+"/"+k] = true
		}
	}
	out := make([]string, 0, len(met))
	for k := range met {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func isTiled(op string) bool {
	for _, o := range tiledOps {
		if o == op {
			return true
		}
	}
	return false
}

// tiledRows returns the rows a row op's kernel walks in tiles: along the softmax axis or the
// last axis, or, for attention, each query's scores over the keys.
func tiledRows(n *graph.Node, in []*tensor.Tensor) [][]float64 {
	x := in[0]
	r := len(x.Shape)
	switch n.Op {
	case "attention", "attention_lse", "attention_grad":
		q, k := in[0], in[1]
		sq, d, sk := q.Shape[r-2], q.Shape[r-1], k.Shape[r-2]
		scale := 1 / math.Sqrt(float64(d))
		if n.HasAttrSet("scale") {
			scale = n.FloatAttr("scale")
		}
		var rows [][]float64
		for bh := range q.Len() / (sq * d) {
			for i := range sq {
				row := make([]float64, sk)
				for j := range sk {
					s := 0.0
					for dd := range d {
						s += q.Float64(bh*sq*d+i*d+dd) * k.Float64(bh*sk*d+j*d+dd)
					}
					row[j] = s * scale
					if n.BoolAttr("causal") && j > i {
						row[j] = math.Inf(-1)
					}
				}
				rows = append(rows, row)
			}
		}
		return rows
	}
	if r == 0 {
		return nil // a scalar's row is one element: it never spans two tiles
	}
	ax := r - 1
	if n.Op == "softmax" || n.Op == "log_softmax" {
		ax, _ = graph.NormAxis(int(n.IntAttr("axis")), r)
	}
	st := tensor.Strides(x.Shape)
	l := x.Shape[ax]
	var rows [][]float64
	for i := range x.Len() {
		if (i/st[ax])%l != 0 {
			continue // not the first element of its row
		}
		row := make([]float64, l)
		for j := range l {
			row[j] = x.Float64(i + j*st[ax])
		}
		rows = append(rows, row)
	}
	return rows
}

// classify records which extremes one row of tile width w holds, for exp range span.
func classify(row []float64, w int, span float64, met map[string]bool) {
	if len(row) <= w {
		return
	}
	equal := true
	best := math.Inf(-1) // maximum of the tiles so far
	for t := 0; t*w < len(row); t++ {
		tmax := math.Inf(-1)
		for _, v := range row[t*w : min((t+1)*w, len(row))] {
			if math.IsInf(v, -1) {
				met[ExtremeMasked] = true
			}
			if v != row[0] {
				equal = false
			}
			tmax = max(tmax, v)
		}
		if t > 0 && !math.IsInf(best, 0) && !math.IsInf(tmax, 0) && !math.IsNaN(tmax) {
			if tmax-best > span {
				met[ExtremeUp] = true
			}
			if best-tmax > span {
				met[ExtremeDown] = true
			}
		}
		best = max(best, tmax)
	}
	if equal && !math.IsNaN(row[0]) {
		met[ExtremeEqual] = true
	}
}

// edgeBudget bounds the draws within which every property that draws random graphs meets
// every tile-crossing extreme (TestTileExtremesAreMetEarly).
const edgeBudget = 40
