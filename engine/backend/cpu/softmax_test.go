package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// onlineState runs OnlineSoftmax over x [rows, cols] in col tiles of width w (the last one
// ragged, padded with -Inf) and returns the final M and L, and the last step's P and Alpha.
func onlineState(t *testing.T, dt numerics.DType, x *tensor.Tensor, w int, pAliasesX bool) (m, l, p, alpha []float64) {
	t.Helper()
	rows, cols := x.Shape[0], x.Shape[1]
	steps := (cols + w - 1) / w
	mo, lo, ao := tensor.New(numerics.F64, []int{rows}), tensor.New(numerics.F64, []int{rows}), tensor.New(numerics.F64, []int{rows})
	po := tensor.New(numerics.F64, []int{rows, w})
	bufs := []*tensor.Tensor{x, mo, lo, po, ao}
	col := func(param int) tile.Access { return block2D(param, rows, 1, tile.C(0), tile.C(0), rows, 1, true) }
	pReg := tile.Reg(3)
	if pAliasesX {
		pReg = 2
	}
	k := kernel([]int{1}, params(bufs, 1, 2, 3, 4), 5, 2,
		tile.Full{Dst: 0, Rows: rows, Cols: 1, Value: math.Inf(-1)},
		tile.Full{Dst: 1, Rows: rows, Cols: 1, Value: 0},
		tile.For{Var: 1, Count: steps, Body: []tile.Instr{
			tile.Load{Dst: 2, Fill: math.Inf(-1), At: block2D(0, rows, cols, tile.C(0), tile.V(1, w), rows, w, true)},
			tile.OnlineSoftmax{M: 0, L: 1, X: 2, P: pReg, Alpha: 4, DType: dt},
		}},
		tile.Store{Src: 0, At: col(1)},
		tile.Store{Src: 1, At: col(2)},
		tile.Store{Src: pReg, At: block2D(3, rows, w, tile.C(0), tile.C(0), rows, w, true)},
		tile.Store{Src: 4, At: col(4)})
	if err := runTile(k, 1, bufs...); err != nil {
		t.Fatal(err)
	}
	return mo.Float64s(), lo.Float64s(), po.Float64s(), ao.Float64s()
}

// The online state, finished as exp(x-M)/L, equals a direct two-pass softmax.
func TestOnlineSoftmaxMatchesTwoPass(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	rows, cols := 4, 23
	ninf := math.Inf(-1)
	vals := make([]float64, rows*cols)
	for i := range vals {
		vals[i] = rng.NormFloat64() * 5
	}
	vals[3] = ninf // a masked key in row 0
	for c := range cols {
		vals[3*cols+c] = ninf // row 3 fully masked
	}
	for _, dt := range []numerics.DType{numerics.F64, numerics.F32} {
		x := tt(dt, []int{rows, cols}, vals...)
		for _, w := range []int{1, 4, 8, 23, 32} {
			m, l, p, alpha := onlineState(t, dt, x, w, false)
			for r := range rows {
				xr := x.Float64s()[r*cols : (r+1)*cols]
				mx := ninf
				for _, v := range xr {
					mx = math.Max(mx, v)
				}
				if r == rows-1 {
					if m[r] != ninf || l[r] != 0 || alpha[r] != 1 {
						t.Errorf("%s w=%d: fully masked row: M=%v L=%v Alpha=%v, want -Inf, 0, 1", dt, w, m[r], l[r], alpha[r])
					}
					continue
				}
				if m[r] != mx {
					t.Errorf("%s w=%d row %d: M = %v, want %v", dt, w, r, m[r], mx)
				}
				sum := 0.0
				for _, v := range xr {
					sum += math.Exp(v - mx)
				}
				tol := 1e-14
				if dt == numerics.F32 {
					tol = 1e-6
				}
				for c, v := range xr {
					got, want := math.Exp(v-m[r])/l[r], math.Exp(v-mx)/sum
					if math.Abs(got-want) > tol*(want+1e-30) && !(got == 0 && want == 0) {
						t.Errorf("%s w=%d (%d,%d): online softmax %v, two-pass %v", dt, w, r, c, got, want)
					}
				}
				// The last step's P is exp(x - M) of that tile, 0 on padding.
				last := (cols - 1) / w * w
				for c := range w {
					want := 0.0
					if last+c < cols {
						want = numerics.Round(dt, math.Exp(numerics.Round(dt, xr[last+c]-m[r])))
					}
					if got := p[r*w+c]; !sameBits(got, want) {
						t.Errorf("%s w=%d P(%d,%d) = %v, want %v", dt, w, r, c, got, want)
					}
				}
			}
		}
	}
}

// Writing P over the scores register gives the same state as a separate register.
func TestOnlineSoftmaxPOverX(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	x := randTensor(rng, numerics.F32, 3, 10)
	m1, l1, p1, a1 := onlineState(t, numerics.F32, x, 4, false)
	m2, l2, p2, a2 := onlineState(t, numerics.F32, x, 4, true)
	sameSlices(t, "M", m2, m1)
	sameSlices(t, "L", l2, l1)
	sameSlices(t, "P", p2, p1)
	sameSlices(t, "Alpha", a2, a1)
}
