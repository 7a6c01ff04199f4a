//go:build !amd64 || purego

package cpu

func kern4x8F32(k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	kern4x8F32Go(k, a, lda, b, ldb, c, ldc)
}

func kern4x4F64(k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	kern4x4F64Go(k, a, lda, b, ldb, c, ldc)
}
