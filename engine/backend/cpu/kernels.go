package cpu

// Portable micro-kernels: c[r*ldc+j] += sum over p of a[r*lda+p]*b[p*ldb+j] for a 4x8 (f32) or
// 4x4 (f64) block, products rounded before each add and p increasing. The amd64 assembly
// computes exactly this, lane by lane; tests compare the two bit for bit.

func kern4x8F32Go(k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	var acc [4][8]float32
	for r := range acc {
		copy(acc[r][:], c[r*ldc:r*ldc+8])
	}
	for p := range k {
		bp := b[p*ldb : p*ldb+8]
		for r := range acc {
			x := a[r*lda+p]
			for j := range acc[r] {
				acc[r][j] += float32(x * bp[j])
			}
		}
	}
	for r := range acc {
		copy(c[r*ldc:r*ldc+8], acc[r][:])
	}
}

func kern4x4F64Go(k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	var acc [4][4]float64
	for r := range acc {
		copy(acc[r][:], c[r*ldc:r*ldc+4])
	}
	for p := range k {
		bp := b[p*ldb : p*ldb+4]
		for r := range acc {
			x := a[r*lda+p]
			for j := range acc[r] {
				acc[r][j] += float64(x * bp[j])
			}
		}
	}
	for r := range acc {
		copy(c[r*ldc:r*ldc+4], acc[r][:])
	}
}
