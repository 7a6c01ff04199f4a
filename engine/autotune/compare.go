package autotune

import (
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// RTol is the relative tolerance per output dtype with which a candidate's outputs must match
// the default schedule's. Another tile shape sums in another order, so a few roundings of the
// output dtype (and, for long reductions, of f32 accumulation) may differ; a candidate that
// drops or repeats a tile is off by a sizeable fraction of the values and fails. Ints and bool
// must match exactly: integer accumulation does not depend on order.
var RTol = map[numerics.DType]float64{
	numerics.F64:    1e-10,
	numerics.F32:    1e-4,
	numerics.F16:    4e-3,
	numerics.BF16:   3e-2,
	numerics.F8E4M3: 0.25,
	numerics.F8E5M2: 0.5,
}

// CompareOutputs reports whether got matches want (outputs of the same program under two
// schedules). Floats: NaN and Inf at the same places, and every finite element within
// RTol*(|want| + rms(want)), where rms is the root mean square of want's finite elements: the
// rms term keeps elements near zero after cancellation from failing on reordering alone,
// while an all-zero or shifted output still fails. The error names the first bad element.
func CompareOutputs(got, want []*tensor.Tensor) error {
	if len(got) != len(want) {
		return errs.New(errs.Internal, "%d outputs, want %d", len(got), len(want))
	}
	for o := range want {
		g, w := got[o], want[o]
		if g == nil || w == nil || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) {
			return errs.New(errs.Internal, "output %d is %s, want %s", o, typeOf(g), typeOf(w))
		}
		if err := compareTensor(o, g, w); err != nil {
			return err
		}
	}
	return nil
}

func typeOf(t *tensor.Tensor) string {
	if t == nil {
		return "missing"
	}
	return t.TypeString()
}

func compareTensor(o int, g, w *tensor.Tensor) error {
	n := w.Len()
	if !w.DType.IsFloat() {
		for i := range n {
			if g.Bits(i) != w.Bits(i) {
				return errs.New(errs.Internal, "output %d element %d: %g, want %g (exact)", o, i, g.Float64(i), w.Float64(i))
			}
		}
		return nil
	}
	var ss float64
	var cnt int
	for i := range n {
		if v := w.Float64(i); !math.IsNaN(v) && !math.IsInf(v, 0) {
			ss += v * v
			cnt++
		}
	}
	rms := 0.0
	if cnt > 0 {
		rms = math.Sqrt(ss / float64(cnt))
	}
	rtol := RTol[w.DType]
	for i := range n {
		a, e := g.Float64(i), w.Float64(i)
		switch {
		case math.IsNaN(e) || math.IsNaN(a):
			if math.IsNaN(e) != math.IsNaN(a) {
				return errs.New(errs.Internal, "output %d element %d: %g, want %g (NaN positions differ)", o, i, a, e)
			}
		case math.IsInf(e, 0) || math.IsInf(a, 0):
			if a != e {
				return errs.New(errs.Internal, "output %d element %d: %g, want %g (Inf positions differ)", o, i, a, e)
			}
		case math.Abs(a-e) > rtol*(math.Abs(e)+rms):
			return errs.New(errs.Internal, "output %d element %d: %g, want %g (|diff| %.3g > rtol %g * (|want| + rms %.3g))",
				o, i, a, e, math.Abs(a-e), rtol, rms)
		}
	}
	return nil
}
