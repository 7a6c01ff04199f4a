package ptx

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// gemmSpec is a Tile IR kernel recognised as the canonical matmul the compiler lowers
// (compiler.lowerMatmul): grid (batch, m-tiles, n-tiles), a zero accumulator, a K loop of
// Load A, Load B, MMA into an f32 accumulator, and one Store. Such a kernel computes, for
// every batch b and every (i, j) inside [0,M) x [0,N), C[b,i,j] = sum over k of A[b,i,k] *
// B[b,k,j] in increasing k, and writes nothing else; the dedicated kernels (gemm_*.go)
// compute that function with their own tiling. scaled_matmul's kernel is the same with B
// read K-major and an epilogue between the loop and the store: two scalar loads and
// C = acc * (scale_a * scale_b), each product rounded to f32.
type gemmSpec struct {
	dt                     numerics.DType // A and B: f16 or bf16, or e4m3 (scaled)
	out                    numerics.DType // C: dt, or bf16/f16/f32 (scaled)
	batch, m, n, k         int
	a, b, c                int    // param indices
	lda, ldb, ldc          int    // row strides in elements (B's rows are k, or n when kMajorB)
	batchA, batchB, batchC int    // batch strides in elements
	irTile                 [3]int // the Tile IR's BM, BN, BK (the schedule's)
	kMajorB                bool   // B stored [N,K]: element (k, n) at n*ldb + k
	sa, sb                 int    // scale params (scaled form), else -1
}

// scaled reports whether the kernel is scaled_matmul's (fp8 operands, scales in the epilogue).
func (s gemmSpec) scaled() bool { return s.sa >= 0 }

// matchGemm reports whether k is the canonical matmul with the preconditions the dedicated
// kernels need: f16/bf16 operands and result, f32 accumulation, A [M,K] and B [K,N] stored row
// major (K and N contiguous), rows 16-byte aligned (K and N multiples of 8, so every 16-byte
// copy is wholly inside or wholly outside the matrix and the zero fill of the copy engine is
// the Tile IR's mask), and every accessed element inside its parameter's allocation; or the
// scaled form with e4m3 operands, B [N,K] (K contiguous, as fp8 wgmma reads it), K a multiple
// of 16 and a bf16/f16/f32 result. Anything else stays on the general path.
func matchGemm(k *tile.Kernel) (gemmSpec, bool) {
	s := gemmSpec{sa: -1, sb: -1}
	if len(k.Grid) != 3 || (len(k.Body) != 3 && len(k.Body) != 7) {
		return s, false
	}
	full, ok1 := k.Body[0].(tile.Full)
	loop, ok2 := k.Body[1].(tile.For)
	st, ok3 := k.Body[len(k.Body)-1].(tile.Store)
	if !ok1 || !ok2 || !ok3 || len(loop.Body) != 3 || full.Value != 0 {
		return s, false
	}
	la, ok1 := loop.Body[0].(tile.Load)
	lb, ok2 := loop.Body[1].(tile.Load)
	mma, ok3 := loop.Body[2].(tile.MMA)
	if !ok1 || !ok2 || !ok3 || mma.AccDType != numerics.F32 || la.Fill != 0 || lb.Fill != 0 {
		return s, false
	}
	result := full.Dst
	if len(k.Body) == 7 {
		var ok bool
		if s.sa, s.sb, result, ok = matchScaleEpilogue(k, full.Dst); !ok {
			return s, false
		}
	}
	if mma.Acc != full.Dst || st.Src != result || mma.A != la.Dst || mma.B != lb.Dst ||
		la.Dst == full.Dst || lb.Dst == full.Dst || la.Dst == lb.Dst {
		return s, false
	}
	bm, bn, bk := la.At.Rows, lb.At.Cols, la.At.Cols
	if full.Rows != bm || full.Cols != bn || lb.At.Rows != bk || st.At.Rows != bm || st.At.Cols != bn {
		return s, false
	}
	A, B, C := la.At, lb.At, st.At
	if len(A.RowDims) != 1 || len(A.ColDims) != 1 || len(B.RowDims) != 1 || len(B.ColDims) != 1 ||
		len(C.RowDims) != 1 || len(C.ColDims) != 1 {
		return s, false
	}
	s.m, s.k, s.n = A.RowDims[0], A.ColDims[0], B.ColDims[0]
	s.batch = k.Grid[0]
	if s.batch > 65535 { // the batch is the launch's grid y
		return s, false
	}
	if B.RowDims[0] != s.k || C.RowDims[0] != s.m || C.ColDims[0] != s.n || s.m < 1 || s.n < 1 || s.k < 1 {
		return s, false
	}
	// Row-major operands only: A's k and B's n contiguous (transposed operands stay general);
	// the scaled form's B has its k contiguous instead.
	s.kMajorB = s.scaled()
	bInner, bOuter := B.ColStrides[0], B.RowStrides[0]
	if s.kMajorB {
		bInner, bOuter = B.RowStrides[0], B.ColStrides[0]
	}
	if A.ColStrides[0] != 1 || bInner != 1 || C.ColStrides[0] != 1 {
		return s, false
	}
	s.lda, s.ldb, s.ldc = A.RowStrides[0], bOuter, C.RowStrides[0]
	gb, gm, gn := tile.Var(0), tile.Var(1), tile.Var(2)
	kt := loop.Var
	var okA, okB, okC bool
	s.batchA, okA = linearIn(A.Base, gb)
	s.batchB, okB = linearIn(B.Base, gb)
	s.batchC, okC = linearIn(C.Base, gb)
	if s.batch == 1 {
		s.batchA, s.batchB, s.batchC = 0, 0, 0 // never multiplied by anything but 0
	}
	if !okA || !okB || !okC || !isTerm(A.RowStart, gm, bm) || !isTerm(A.ColStart, kt, bk) ||
		!isTerm(B.RowStart, kt, bk) || !isTerm(B.ColStart, gn, bn) ||
		!isTerm(C.RowStart, gm, bm) || !isTerm(C.ColStart, gn, bn) {
		return s, false
	}
	if k.Grid[1] != ceilDivInt(s.m, bm) || k.Grid[2] != ceilDivInt(s.n, bn) || loop.Count != ceilDivInt(s.k, bk) {
		return s, false
	}
	// Unmasked accesses must not need their mask: every tile wholly inside the matrix.
	if (!A.Mask && (s.m%bm != 0 || s.k%bk != 0)) || (!B.Mask && (s.k%bk != 0 || s.n%bn != 0)) ||
		(!C.Mask && (s.m%bm != 0 || s.n%bn != 0)) {
		return s, false
	}
	pa, pb, pc := k.Params[A.Param], k.Params[B.Param], k.Params[C.Param]
	s.a, s.b, s.c = A.Param, B.Param, C.Param
	s.dt, s.out = pa.DType, pc.DType
	if pb.DType != s.dt || s.c == s.a || s.c == s.b || !pc.Output || s.c == s.sa || s.c == s.sb {
		return s, false
	}
	switch {
	case s.scaled():
		if s.dt != numerics.F8E4M3 || (s.out != numerics.BF16 && s.out != numerics.F16 && s.out != numerics.F32) {
			return s, false
		}
	case (s.dt != numerics.F16 && s.dt != numerics.BF16) || s.out != s.dt:
		return s, false
	}
	// 16-byte rows and batch slices: K, N and every operand stride a multiple of one 16-byte
	// chunk of elements (C's stores are pairs: its multiples of 8 keep them aligned).
	chunk := 16 / s.dt.Size()
	for _, v := range []int{s.k, s.lda, s.ldb, s.batchA, s.batchB} {
		if v%chunk != 0 {
			return s, false
		}
	}
	for _, v := range []int{s.n, s.ldc, s.batchC} {
		if v%8 != 0 {
			return s, false
		}
	}
	bRows, bCols := s.k, s.n
	if s.kMajorB {
		bRows, bCols = s.n, s.k
	}
	if s.lda < s.k || s.ldb < bCols || s.ldc < s.n {
		return s, false
	}
	last := func(batchStride, rows, ld, cols int) int {
		return (s.batch-1)*batchStride + (rows-1)*ld + cols
	}
	if last(s.batchA, s.m, s.lda, s.k) > pa.Len || last(s.batchB, bRows, s.ldb, bCols) > pb.Len ||
		last(s.batchC, s.m, s.ldc, s.n) > pc.Len {
		return s, false
	}
	// Byte offsets and the kernel's .s32 index arithmetic.
	for _, p := range []tile.Param{pa, pb, pc} {
		if p.Len > maxIndex/4 {
			return s, false
		}
	}
	s.irTile = [3]int{bm, bn, bk}
	return s, true
}

// matchScaleEpilogue matches Body[2:6] of the scaled form: Load scale_a, Load scale_b (f32
// scalars, [1,1] tiles at offset 0), scale = scale_a * scale_b, res = acc * scale, both in f32.
// It returns the two scale params and res.
func matchScaleEpilogue(k *tile.Kernel, acc tile.Reg) (sa, sb int, res tile.Reg, ok bool) {
	l1, ok1 := k.Body[2].(tile.Load)
	l2, ok2 := k.Body[3].(tile.Load)
	m1, ok3 := k.Body[4].(tile.Binary)
	m2, ok4 := k.Body[5].(tile.Binary)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return 0, 0, 0, false
	}
	scalar := func(l tile.Load) bool {
		at := l.At
		return at.Rows == 1 && at.Cols == 1 && len(at.Base.Terms) == 0 && at.Base.Const == 0 &&
			len(at.RowStart.Terms) == 0 && at.RowStart.Const == 0 && len(at.ColStart.Terms) == 0 && at.ColStart.Const == 0 &&
			k.Params[at.Param].DType == numerics.F32 && k.Params[at.Param].Len >= 1 && !k.Params[at.Param].Output
	}
	if !scalar(l1) || !scalar(l2) || m1.Op != tile.Mul || m2.Op != tile.Mul || m1.DType != numerics.F32 || m2.DType != numerics.F32 {
		return 0, 0, 0, false
	}
	if m1.A != l1.Dst || m1.B != l2.Dst || m2.A != acc || m2.B != m1.Dst || l1.Dst == acc || l2.Dst == acc || m1.Dst == acc || m2.Dst == acc {
		return 0, 0, 0, false
	}
	return l1.At.Param, l2.At.Param, m2.Dst, true
}

// linearIn returns c when e is c*v (or the constant 0, c = 0).
func linearIn(e tile.Expr, v tile.Var) (int, bool) {
	if e.Const != 0 {
		return 0, false
	}
	c := 0
	for _, t := range e.Terms {
		if t.Var != v {
			if t.Coef != 0 {
				return 0, false
			}
			continue
		}
		c += t.Coef
	}
	return c, c >= 0
}

// isTerm reports whether e is exactly coef*v.
func isTerm(e tile.Expr, v tile.Var, coef int) bool {
	c, ok := linearIn(e, v)
	return ok && c == coef
}

func ceilDivInt(a, b int) int { return (a + b - 1) / b }
