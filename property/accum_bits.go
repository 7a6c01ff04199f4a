package property

import (
	"github.com/onsi/gomega"
	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/rounding"
)

// accumCombos is every accumulator the verifier accepts for the ops rounding models
// bit for bit (matmul, batch_matmul, reduce_sum, reduce_mean, reduce_max) on each input dtype:
// narrower than the inputs too (accum=f32 on f64, accum=bf16 on f32, fp8 accumulators), which
// agree/ref never draws (its AccumChoices are those the tolerance policy covers).
var accumCombos = rounding.AccumCombos()

// accumBits checks every accepted accumulator against Tile IR's rounding rules: draw i of a run
// takes combination i (so a run draws each once first, then drawn ones, and a newly
// accepted combination is drawn as soon as the verifier accepts it), with a drawn shape that
// crosses tiles (K past the 32-wide K tile, rows past the 256-wide reduce tile, tile hints) and
// drawn values; the output's bits must be those rounding.Accum computes: each product and sum
// rounded to the accumulator, in the documented order.
var accumBits = Property{
	Name:   "accum/bits",
	Judged: "bitwise",
	Checks: 2 * len(accumCombos), // each once in order, then as many drawn
	Doc: "every accumulator the verifier accepts for matmul, batch_matmul and the reductions (narrower than the " +
		"inputs too: accum=f32 on f64, bf16, f16, fp8) gives the bits of Tile IR's rules: each product and sum rounded " +
		"to the accumulator in the documented order (an independent big-number model, rounding)",
	Body: func(e Env) func(*rapid.T) {
		return func(t *rapid.T) {
			g := gomega.NewWithT(t)
			c := drawCombo(t, e.Config.edges)
			s := drawAccumShape(t, c)
			rc, err := rounding.AccumCase(c, s, rapid.Uint64().Draw(t, "seed"))
			g.Expect(err).NotTo(gomega.HaveOccurred(), "building %s", c)
			got, err := rc.Run(e.Backend)
			g.Expect(err).NotTo(gomega.HaveOccurred(), "running %s on %s", c, e.Backend.Name())
			g.Expect(rc.Compare(got)).To(gomega.Succeed(), "%s on %s, shape %+v", c, e.Backend.Name(), s)
		}
	},
}

// drawCombo takes the combination of this draw's number (the edge cursor's), or a drawn one
// past the schedule and outside Check.
func drawCombo(t *rapid.T, cur *edgeCursor) rounding.Combo {
	if cur != nil && cur.cur < len(accumCombos) {
		c := accumCombos[cur.cur]
		t.Logf("combination %d of %d: %s", cur.cur+1, len(accumCombos), c)
		return c
	}
	return rapid.SampledFrom(accumCombos).Draw(t, "combo")
}

// accumKs and accumCols cross the default K tile (32) and reduce tile (256): one element, a
// tile, one past it, ragged multiples.
var (
	accumKs   = []int{1, 2, 3, 31, 32, 33, 65, 70, 100, 257}
	accumCols = []int{1, 2, 3, 255, 256, 257, 300, 513, 700}
)

func drawAccumShape(t *rapid.T, c rounding.Combo) rounding.Shape {
	switch c.Op {
	case "matmul", "batch_matmul":
		s := rounding.Shape{Batch: rapid.IntRange(1, 3).Draw(t, "batch"), M: rapid.IntRange(1, 6).Draw(t, "m"),
			N: rapid.IntRange(1, 6).Draw(t, "n"), K: rapid.SampledFrom(accumKs).Draw(t, "k"),
			TransA: rapid.Bool().Draw(t, "transpose_a"), TransB: rapid.Bool().Draw(t, "transpose_b")}
		if rapid.Bool().Draw(t, "tile_hint") {
			for range 3 {
				s.TileHint = append(s.TileHint, rapid.SampledFrom(tileSizes).Draw(t, "tile"))
			}
		}
		return s
	}
	return rounding.Shape{Rows: rapid.IntRange(1, 4).Draw(t, "rows"), Cols: rapid.SampledFrom(accumCols).Draw(t, "cols"),
		All: rapid.Bool().Draw(t, "all_axes")}
}
