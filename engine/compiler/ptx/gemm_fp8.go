package ptx

// The fp8 side of the dedicated matmul kernel (gemm_kernel.go; scaled_matmul, e4m3 operands,
// wgmma only): a 128-byte row holds 128 k, so a k-tile is 128 deep and one wgmma k32 reads 32
// bytes of a row, as a bf16 k16 does. 8-bit wgmma has no transpose, so B is K-major like A (the
// graph op stores it [N,K]) and its stage is laid out like A's: BN rows of 128 bytes. Hopper's fp8 tensor cores keep fewer bits than f32 when they
// accumulate, so each k-tile's products go into fresh registers (scale-d false on its first
// wgmma) and CUDA cores add them to the f32 accumulators ("promotion", as cuBLAS does unless
// asked for fast accumulation): with wait 1 there are two such sets and the add of tile t-1
// overlaps the wgmma of tile t. Chain per element: acc += (sum over the tile's 128 k), k-tiles
// in increasing order; the epilogue multiplies by scale_a*scale_b (rounded to f32) and rounds
// once to the output dtype.

// defaultFP8Cfg is the fp8 kernel's tiling: 6 stages of 32 KiB, two promotion sets.
func defaultFP8Cfg() gemmCfg {
	return gemmCfg{path: "wgmma", bm: 128, bn: 128, stages: 6, wait: 1, group: 8, fp8: true}
}

// promoting reports whether the kernel adds each k-tile's fp8 products to f32 accumulators.
func (c gemmCfg) promoting() bool { return c.fp8 && !c.fastAccum }

// sets is the number of promotion register sets (fp8): one per wgmma group in flight.
func (c gemmCfg) sets() int { return c.wait + 1 }

// scaleAcc multiplies every accumulator by scale_a * scale_b (the product rounded to f32
// first, as the Tile IR's epilogue computes it).
func (k *gemmGen) scaleAcc() {
	sa, sb, sc := k.r("f"), k.r("f"), k.r("f")
	k.op("ld.global.f32", sa, "["+k.gSA+"]")
	k.op("ld.global.f32", sb, "["+k.gSB+"]")
	k.op("mul.rn.f32", sc, sa, sb)
	for _, a := range k.acc {
		k.op("mul.rn.f32", a, a, sc)
	}
}

// promote adds promotion set u to the f32 accumulators.
func (k *gemmGen) promote(u int) {
	for i, a := range k.acc {
		k.op("add.rn.f32", a, a, k.tmp[u][i])
	}
}
