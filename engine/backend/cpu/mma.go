package cpu

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// mmaScratch holds copies of operands that alias the accumulator.
type mmaScratch struct {
	f32 []float32
	f64 []float64
}

func (s *mmaScratch) copy32(v []float32) []float32 {
	s.f32 = append(s.f32[:0], v...)
	return s.f32
}

func (s *mmaScratch) copy64(v []float64) []float64 {
	s.f64 = append(s.f64[:0], v...)
	return s.f64
}

// mma computes Acc += A x B. f32 and f64 accumulators take blocked kernels; every other
// accumulator dtype (16-bit floats, ints) a plain loop that rounds after each step. All paths
// add the K products of an output element in increasing k order, so they agree bit for bit.
func (w *worker) mma(in tile.MMA) {
	tc, ta, tb := &w.regs[in.Acc], &w.regs[in.A], &w.regs[in.B]
	m, k, n := ta.rows, ta.cols, tb.cols
	switch in.AccDType {
	case numerics.F32:
		c, okc := tc.get32()
		a, oka := ta.get32()
		b, okb := tb.get32()
		// Operands that are not all f32 values (say f64 inputs with an f32 accumulator) fall
		// through to the float64 loop, which rounds each product and sum to f32 as written.
		if okc && oka && okb {
			if in.A == in.Acc {
				a = w.mm.copy32(a)
			}
			if in.B == in.Acc {
				b = w.mm.copy32(b)
			}
			mmaF32(m, n, k, a, b, c)
			tc.dirty32()
			return
		}
	case numerics.F64:
		c, a, b := tc.get64(), ta.get64(), tb.get64()
		a, b = w.unalias64(in, a, b)
		mmaF64(m, n, k, a, b, c)
		tc.dirty64()
		return
	}
	c, a, b := tc.get64(), ta.get64(), tb.get64()
	a, b = w.unalias64(in, a, b)
	mmaRounded(in.AccDType, m, n, k, a, b, c)
	tc.dirty64()
}

func (w *worker) unalias64(in tile.MMA, a, b []float64) ([]float64, []float64) {
	if in.A == in.Acc {
		a = w.mm.copy64(a)
	}
	if in.B == in.Acc {
		b = w.mm.copy64(b)
	}
	return a, b
}

// mmaF32 runs the 4x8 kernel over the interior of c (row-major m x n, a m x k, b k x n) and a
// scalar loop over the ragged edges.
func mmaF32(m, n, k int, a, b, c []float32) {
	i := 0
	for ; i+4 <= m; i += 4 {
		j := 0
		for ; j+8 <= n; j += 8 {
			kern4x8F32(k, a[i*k:], k, b[j:], n, c[i*n+j:], n)
		}
		dotsF32(i, i+4, failpoint.Pick(failpoint.CPUMMARaggedColumn, j, j+1), n, n, k, a, b, c)
	}
	dotsF32(i, m, 0, n, n, k, a, b, c)
}

// dotsF32 computes outputs rows [i0,i1) x cols [j0,j1) one at a time.
func dotsF32(i0, i1, j0, j1, n, k int, a, b, c []float32) {
	for i := i0; i < i1; i++ {
		ar := a[i*k : (i+1)*k]
		for j := j0; j < j1; j++ {
			s := c[i*n+j]
			for p, x := range ar {
				s += float32(x * b[p*n+j])
			}
			c[i*n+j] = s
		}
	}
}

func mmaF64(m, n, k int, a, b, c []float64) {
	i := 0
	for ; i+4 <= m; i += 4 {
		j := 0
		for ; j+4 <= n; j += 4 {
			kern4x4F64(k, a[i*k:], k, b[j:], n, c[i*n+j:], n)
		}
		dotsF64(i, i+4, j, n, n, k, a, b, c)
	}
	dotsF64(i, m, 0, n, n, k, a, b, c)
}

func dotsF64(i0, i1, j0, j1, n, k int, a, b, c []float64) {
	for i := i0; i < i1; i++ {
		ar := a[i*k : (i+1)*k]
		for j := j0; j < j1; j++ {
			s := c[i*n+j]
			for p, x := range ar {
				s += float64(x * b[p*n+j])
			}
			c[i*n+j] = s
		}
	}
}

// mmaRounded is the reference loop for any accumulator: each product and each sum is rounded
// to dt (ints: exact int64 arithmetic wrapped at dt's width).
func mmaRounded(dt numerics.DType, m, n, k int, a, b, c []float64) {
	for i := range m {
		ar := a[i*k : (i+1)*k]
		for j := range n {
			if dt.IsInt() {
				s := toInt(c[i*n+j])
				for p, x := range ar {
					s = numerics.WrapInt(dt, s+numerics.WrapInt(dt, toInt(x)*toInt(b[p*n+j])))
				}
				c[i*n+j] = float64(s)
				continue
			}
			s := c[i*n+j]
			for p, x := range ar {
				s = roundTo(dt, s+roundTo(dt, float64(x*b[p*n+j])))
			}
			c[i*n+j] = s
		}
	}
}
