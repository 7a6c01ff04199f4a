package property

import (
	"fmt"
	"math"
	"math/rand/v2"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// The edge schedule: before any random graph, a property that draws random graphs (Raw,
// Cases) meets every row op with running state across tiles on its tile-crossing extremes,
// one case per draw: rows a tile and a half to two tiles long (the width read from the
// compiler's schedule, TileWidth) whose tiles differ by more than exp's range, -Inf entries,
// rows of one value. A random search meets these late or never (TestTileExtremesAreMetEarly:
// at CI's seed agree/ref met 9 of the 28 (op, extreme) pairs in 1000 draws, softmax and
// log_softmax with a tile far above or below the rest never), and they are what a running max
// or a rescaled sum gets wrong. Which case a draw gets
// is fixed by the draw's number within the Check (Config.edges); its magnitudes and values are
// rapid draws, so a failing edge case still shrinks.

// EdgePattern is how an edge case's rows cross their tiles.
type EdgePattern uint8

const (
	EdgeUp     EdgePattern = iota // one later tile shifted far above the rest: the maximum is in the last (or a middle) tile
	EdgeDown                      // the first tile far above the rest (and the last far below): later tiles underflow
	EdgeMasked                    // a first tile of -Inf, then finite values; -Inf scattered in another row
	EdgeEqual                     // rows of one value across every tile
	EdgeInf                       // +Inf in the last tile of one row, a row of -Inf (agree/nan-inf)
)

var edgePatternNames = [...]string{"later-tile-above", "first-tile-above", "masked", "all-equal", "inf"}

func (p EdgePattern) String() string { return edgePatternNames[p] }

// Edge is one scheduled case: op on rows of Len elements (tile width Width) of dtype DType,
// shaped by Pattern; Shift and the values are drawn.
type Edge struct {
	Op      string
	DType   numerics.DType
	Pattern EdgePattern
	Width   int     // the kernel's tile width along the row (keys for attention)
	Len     int     // row length: one to two tiles and one more element, so the last tile is ragged
	Rows    int     // rows of a row op (1 to 3): the pattern's two variants, then N(0,1)
	Shift   float64 // how far the shifted tile moves: beyond ln(max) of the accumulator
	Wrt     string  // attention_grad: the gradient taken
	// Special adds a row of -Inf (a query of NaN for attention), so that every result holds
	// NaN as agree/nan-inf requires, next to the pattern's finite rows.
	Special bool
}

func (e Edge) String() string {
	return fmt.Sprintf("%s %s %s %d rows of %d (tile %d) shift %g", e.Op, e.DType, e.Pattern, e.Rows, e.Len, e.Width, e.Shift)
}

// edgeDTypes are rotated through the schedule: f32 and the narrow formats, whose exp range is
// the f32 accumulator's, and f64, whose is its own.
var edgeDTypes = []numerics.DType{numerics.F32, numerics.F16, numerics.BF16, numerics.F64}

// EdgeSchedule lists the edge cases in the order properties meet them, pattern by pattern so
// that every pattern comes within the first len(tiledOps) draws of its predecessor: the row
// ops of the registry that keep running state (tiledOps), each dtype in turn. special (for
// agree/nan-inf) adds the +Inf pattern and rows of one value, and a row of -Inf to every case.
func EdgeSchedule(special bool) []Edge {
	patterns := []EdgePattern{EdgeUp, EdgeDown, EdgeMasked, EdgeEqual}
	if special {
		patterns = []EdgePattern{EdgeUp, EdgeDown, EdgeMasked, EdgeInf, EdgeEqual}
	}
	var out []Edge
	i := 0
	for _, p := range patterns {
		for _, op := range tiledOps {
			d, ok := graph.Lookup(op)
			if !ok {
				continue
			}
			dt := edgeDTypes[i%len(edgeDTypes)]
			i++
			if !d.Supports(dt) {
				continue
			}
			w, err := TileWidth(op, dt)
			if err != nil {
				continue
			}
			out = append(out, Edge{Op: op, DType: dt, Pattern: p, Width: w, Len: 2*w + 1, Rows: 3, Special: special})
		}
	}
	return out
}

// edgeCursor numbers the draws of one Check: draw i < len(schedule) gets edge case i. After a
// failure it stays put, so that every run rapid makes while shrinking rebuilds the failing
// edge case with smaller draws.
type edgeCursor struct{ next, cur int }

// begin starts a draw: the next number, or the same one while a failure is shrunk.
func (c *edgeCursor) begin(shrinking bool) {
	if c == nil {
		return
	}
	if !shrinking && c.next < math.MaxInt {
		c.cur = c.next
		c.next++
	}
}

// edgeFirst draws the scheduled edge case of this draw, if any, else a random spec.
func edgeFirst(cfg Config, random *rapid.Generator[Spec]) *rapid.Generator[Spec] {
	sched := EdgeSchedule(cfg.Special)
	return rapid.Custom(func(t *rapid.T) Spec {
		if c := cfg.edges; c != nil && c.cur < len(sched) {
			return edgeSpec(t, sched[c.cur])
		}
		return random.Draw(t, "spec")
	})
}

// edgeSpec draws an edge case's magnitudes: a shift beyond the accumulator's exp range (ln of
// f32's max is 88.7, f64's 709.8) and below an eighth of the dtype's max, and the seed.
func edgeSpec(t *rapid.T, e Edge) Spec {
	span := math.Log(numerics.MaxFinite(numerics.F32))
	if e.DType == numerics.F64 {
		span = math.Log(numerics.MaxFinite(numerics.F64))
	}
	lo := int(span*1.15) + 1
	hi := max(lo, min(int(span*12), int(numerics.MaxFinite(e.DType)/8)))
	e.Shift = float64(rapid.IntRange(lo, hi).Draw(t, "edge_shift"))
	// Both shrink towards the smallest case that still crosses a tile: one row of Width+1.
	e.Len = e.Width + 1 + rapid.IntRange(0, e.Width).Draw(t, "edge_len_past_tile")
	e.Rows = 1 + rapid.IntRange(0, 2).Draw(t, "edge_more_rows")
	if e.Op == "attention_grad" {
		e.Wrt = rapid.SampledFrom([]string{"q", "k", "v"}).Draw(t, "edge_wrt")
	}
	t.Logf("edge case: %s", e)
	return Spec{Storage: e.DType, Steps: []Step{{Seed: rapid.Uint64().Draw(t, "edge_seed")}}, Edge: &e}
}

// edge builds the edge case as the graph's first node(s).
func (b *builder) edge(e Edge) error {
	r := rand.New(rand.NewPCG(b.s.Seed, 0xed9e))
	switch e.Op {
	case "softmax", "log_softmax", "layernorm", "rmsnorm":
		x := b.inputOf(b.name(), edgeRows(e, e.Rows, r), ClassLogits)
		in := []*graph.Value{x}
		attrs := graph.Attrs{}
		switch e.Op {
		case "softmax", "log_softmax":
			attrs["axis"] = graph.Int(-1)
		case "layernorm":
			in = append(in, b.inputOf(b.name(), Fill(e.DType, []int{e.Len}, ClassPositive, r.Uint64()), ClassPositive),
				b.inputOf(b.name(), Fill(e.DType, []int{e.Len}, ClassNormal, r.Uint64()), ClassNormal))
		case "rmsnorm":
			in = append(in, b.inputOf(b.name(), Fill(e.DType, []int{e.Len}, ClassPositive, r.Uint64()), ClassPositive))
		}
		_, err := b.node(e.Op, attrs, in...)
		return err
	case "attention", "attention_lse", "attention_grad":
		return b.edgeAttention(e, r)
	}
	return fmt.Errorf("no edge template for %s", e.Op)
}

func (b *builder) name() string { return fmt.Sprintf("x%d", len(b.g.Inputs)) }

// edgeRows fills rows x Len values: row 0 and row 1 carry the pattern (two variants), the
// others are N(0,1), so no output is constant (or -Inf, for agree/nan-inf).
func edgeRows(e Edge, rows int, r *rand.Rand) *tensor.Tensor {
	t := tensor.New(e.DType, []int{rows, e.Len})
	for i := range rows {
		row := edgeRow(e, i, r)
		for j, v := range row {
			t.SetFloat64(i*e.Len+j, v)
		}
	}
	return t
}

// edgeRow is row i of an edge case: N(0,1) values moved by the pattern.
func edgeRow(e Edge, i int, r *rand.Rand) []float64 {
	row := make([]float64, e.Len)
	for j := range row {
		row[j] = r.NormFloat64()
	}
	w, last := e.Width, (e.Len-1)/e.Width*e.Width // first column of the last tile
	inTile := func(j, t int) bool { return j/w == t }
	for j := range row {
		switch {
		case i > 1 && e.Special:
			row[j] = math.Inf(-1)
		case i > 1:
		case e.Pattern == EdgeUp && i == 0 && j >= last:
			row[j] += e.Shift // the maximum in the last, ragged tile
		case e.Pattern == EdgeUp && i == 1 && inTile(j, 1):
			row[j] += e.Shift // ... in a middle tile, then a tile below it
		case e.Pattern == EdgeDown && i == 0 && inTile(j, 0):
			row[j] += e.Shift
		case e.Pattern == EdgeDown && i == 1 && j >= last:
			row[j] -= e.Shift
		case e.Pattern == EdgeMasked && i == 0 && inTile(j, 0):
			row[j] = math.Inf(-1)
		case e.Pattern == EdgeMasked && i == 1 && r.IntN(3) == 0 && j != last:
			row[j] = math.Inf(-1)
		case e.Pattern == EdgeEqual && i == 0:
			row[j] = e.Shift / 2
		case e.Pattern == EdgeEqual && i == 1:
			row[j] = -e.Shift
		case e.Pattern == EdgeInf && i == 0 && j == e.Len-1:
			row[j] = math.Inf(1)
		case e.Pattern == EdgeInf && i == 1:
			row[j] = math.Inf(-1)
		}
	}
	return row
}

// edgeAttention builds attention, attention_lse or attention_grad over Len keys whose scores
// follow the pattern: every element of key row j is s_j/(scale·d), so that a query of ones
// scores s_j; the queries are ones, -1/2 (the pattern mirrored: a tile far below becomes one
// far above) and zeros (every score equal), and for -Inf patterns only positive.
func (b *builder) edgeAttention(e Edge, r *rand.Rand) error {
	const sq, d, dv = 3, 4, 4
	scale := 1 / math.Sqrt(d)
	q, k := tensor.New(e.DType, []int{sq, d}), tensor.New(e.DType, []int{e.Len, d})
	qs := []float64{1, -0.5, 0}
	if e.Pattern == EdgeMasked || e.Pattern == EdgeInf {
		qs = []float64{1, 0.5, 0.25}
	}
	if e.Special {
		qs[2] = math.NaN()
	}
	for i := range sq {
		for dd := range d {
			q.SetFloat64(i*d+dd, qs[i])
		}
	}
	// The key pattern is the pattern of row 0 (row 1 for the -Inf row of EdgeInf).
	row := edgeRow(e, 0, r)
	if e.Pattern == EdgeMasked {
		for j, v := range edgeRow(e, 1, r) {
			if math.IsInf(v, -1) && j/e.Width != 0 {
				row[j] = v
			}
		}
	}
	for j, s := range row {
		for dd := range d {
			k.SetFloat64(j*d+dd, s/(scale*d))
		}
	}
	qv, kv := b.inputOf(b.name(), q, ClassLogits), b.inputOf(b.name(), k, ClassLogits)
	if e.Op == "attention_lse" {
		_, err := b.node("attention_lse", graph.Attrs{}, qv, kv)
		return err
	}
	v := b.inputOf(b.name(), Fill(e.DType, []int{e.Len, dv}, ClassNormal, r.Uint64()), ClassNormal)
	o, err := b.node("attention", graph.Attrs{}, qv, kv, v)
	if err != nil || e.Op == "attention" {
		return err
	}
	do := b.inputOf(b.name(), Fill(e.DType, []int{sq, dv}, ClassNormal, r.Uint64()), ClassNormal)
	lse, err := b.node("attention_lse", graph.Attrs{}, qv, kv)
	if err != nil {
		return err
	}
	_, err = b.node("attention_grad", graph.Attrs{"wrt": graph.String(e.Wrt)}, qv, kv, v, o, do, lse)
	return err
}
