//go:build !purego

package cpu

// The SSE kernels use MULPS/ADDPS (MULPD/ADDPD): separate IEEE multiply and add per lane, never
// FMA, so each lane computes what kern4x8F32Go computes for its element. SSE2 is part of the
// amd64 baseline, so no feature check is needed. Build with -tags purego to use the portable
// kernels instead.

//go:noescape
func mma4x8F32(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func mma4x4F64(k int, a *float64, lda int, b *float64, ldb int, c *float64, ldc int)

// kern4x8F32 checks every bound the assembly will touch, then runs it.
func kern4x8F32(k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if k <= 0 {
		return
	}
	_ = a[3*lda+k-1]
	_ = b[(k-1)*ldb+7]
	_ = c[3*ldc+7]
	mma4x8F32(k, &a[0], lda, &b[0], ldb, &c[0], ldc)
}

func kern4x4F64(k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	if k <= 0 {
		return
	}
	_ = a[3*lda+k-1]
	_ = b[(k-1)*ldb+3]
	_ = c[3*ldc+3]
	mma4x4F64(k, &a[0], lda, &b[0], ldb, &c[0], ldc)
}
