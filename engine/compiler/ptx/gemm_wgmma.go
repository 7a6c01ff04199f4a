package ptx

// The wgmma (sm_90a) compute side: the two warpgroups of the CTA each own 64 rows of the
// 128-row tile and all bn columns; per k-tile a warpgroup issues four
// wgmma.mma_async.m64n{bn}k16 (fp8: k32) reading A and B straight from the swizzled stage
// through matrix descriptors, then commits the group and waits until at most c.wait groups are
// in flight (fp8: then adds the retired group's promotion set to the accumulators).

// Matrix descriptor fields (PTX ISA, warpgroup matrix descriptor): start address >> 4 in bits
// 0-13, leading-dimension byte offset >> 4 in 16-29, stride-dimension byte offset >> 4 in
// 32-45, swizzle mode in 62-63 (1 = 128-byte).
const (
	descSwizzle128 = uint64(1) << 62
	// Stride byte offset of both operands: 8 rows of 128 bytes to the next 8-row group.
	descSBO = uint64(1024>>4) << 32
	// A is K-major: the leading byte offset is unused with a swizzle and must read 1.
	descLBOA = uint64(1) << 16
	// B is MN-major: the leading byte offset steps from one 64-column block of B to the next.
	descLBOB = uint64(gemmBK*swizzleRow>>4) << 16
	// A K-major B (fp8) is described as A is.
	descLBOBK = descLBOA
)

func (k *gemmGen) wgmmaSetup() {
	wg := k.bin32("shr.u32", k.warp, "2")
	aAddr := k.mad32(wg, k.imm(64*swizzleRow), k.base)
	bAddr := k.bin32("add.s32", k.base, k.imm(k.c.aBytes()))
	k.descA = k.descriptor(aAddr, descSwizzle128|descSBO|descLBOA)
	lbo := descLBOB
	if k.s.kMajorB {
		lbo = descLBOBK
	}
	k.descB = k.descriptor(bAddr, descSwizzle128|descSBO|lbo)
}

// computeWgmma multiplies the k-tile at stage; u is the fp8 promotion set it writes.
func (k *gemmGen) computeWgmma(stage string, u int) {
	c := k.c
	so := k.r("rd")
	k.op("cvt.u64.u32", so, k.bin32("shr.u32", stage, "4"))
	dA, dB := k.r("rd"), k.r("rd")
	k.op("add.s64", dA, k.descA, so)
	k.op("add.s64", dB, k.descB, so)
	scale := k.r("p")
	k.op("setp.ne.u32", scale, k.tid, "0xFFFFFFFF") // always true: accumulate into D
	acc := "{" + joinRegs(k.acc) + "}"
	kStep := 16
	opcode := "wgmma.mma_async.sync.aligned.m64n" + itoa(c.bn) + "k16.f32." + k.cvt16() + "." + k.cvt16()
	if c.fp8 {
		kStep = 32
		opcode = "wgmma.mma_async.sync.aligned.m64n" + itoa(c.bn) + "k32.f32.e4m3.e4m3"
		if c.promoting() {
			acc = "{" + joinRegs(k.tmp[u]) + "}"
		}
	}
	k.op("wgmma.fence.sync.aligned")
	for j := 0; j < c.bk()/kStep; j++ {
		a, b := dA, dB
		if j > 0 {
			a, b = k.r("rd"), k.r("rd")
			// A: one step is 32 bytes along the swizzled row; B: 16 k are 16 rows of 128
			// bytes, or (K-major) 32 bytes along its row as for A.
			bStep := 16 * swizzleRow * j
			if k.s.kMajorB {
				bStep = 32 * j
			}
			k.op("add.s64", a, dA, itoa(32*j>>4))
			k.op("add.s64", b, dB, itoa(bStep>>4))
		}
		if c.fp8 {
			// scale-d false on the tile's first step: the set starts from this tile's products.
			// 8-bit wgmma has no transpose operands: both K-major.
			d := scale
			if j == 0 && c.promoting() {
				d = k.r("p")
				k.op("setp.eq.u32", d, k.tid, "0xFFFFFFFF") // always false
			}
			k.op(opcode, acc, a, b, d, "1", "1")
			continue
		}
		// scale-a 1, scale-b 1, A not transposed (K-major), B transposed (MN-major).
		k.op(opcode, acc, a, b, scale, "1", "1", "0", "1")
	}
	k.op("wgmma.commit_group.sync.aligned")
	k.op("wgmma.wait_group.sync.aligned", itoa(c.wait))
	if c.promoting() { // the group retired by this wait wrote set (u+1) % sets (set u itself at wait 0)
		k.promote((u + 1) % c.sets())
	}
}

// epilogueWgmma stores the accumulators. Fragment of m64nNk16 (per warp w of the warpgroup,
// lane l): acc[4i+0..1] are row 16w + l/4, cols 8i + 2(l%4) + 0..1; acc[4i+2..3] the row 8
// below.
func (k *gemmGen) epilogueWgmma() {
	if k.s.scaled() {
		k.scaleAcc()
	}
	wg := k.bin32("shr.u32", k.warp, "2")
	wl := k.bin32("and.b32", k.warp, "3")
	r := k.mad32(wg, "64", k.m0)
	r = k.mad32(wl, "16", r)
	row := k.bin32("add.s32", r, k.bin32("shr.u32", k.lane, "2"))
	col := k.mad32(k.bin32("and.b32", k.lane, "3"), "2", k.n0)
	k.storeRows(row, col, func(i int) (int, [4]string) {
		return 8 * i, [4]string{k.acc[4*i], k.acc[4*i+1], k.acc[4*i+2], k.acc[4*i+3]}
	}, k.c.bn/8)
}

// storeRows writes n pairs of 8-column blocks for rows row and row+8: block i starts at
// column col + off(i) and holds (row, +0), (row, +1), (row+8, +0), (row+8, +1).
func (k *gemmGen) storeRows(row, col string, block func(i int) (int, [4]string), n int) {
	s := k.s
	size := s.out.Size()
	ok0, ok1 := k.r("p"), k.r("p")
	k.op("setp.lt.s32", ok0, row, k.imm(s.m))
	k.op("setp.lt.s32", ok1, row, k.imm(s.m-8))
	a0 := k.addrOf(k.gC, row, s.ldc, col, size)
	a1 := k.r("rd")
	k.op("add.s64", a1, a0, itoa64(int64(size*8*s.ldc)))
	for i := 0; i < n; i++ {
		off, v := block(i)
		colOK := k.r("p")
		k.op("setp.lt.s32", colOK, col, k.imm(s.n-off))
		k.storePair(ok0, colOK, a0+"+"+itoa(size*off), v[0], v[1])
		k.storePair(ok1, colOK, a1+"+"+itoa(size*off), v[2], v[3])
	}
}

func joinRegs(rs []string) string {
	out := ""
	for i, r := range rs {
		if i > 0 {
			out += ","
		}
		out += r
	}
	return out
}

func hex64(v uint64) string { return "0x" + upperHex(v) }

func upperHex(v uint64) string {
	const digits = "0123456789ABCDEF"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[v&15]
		v >>= 4
	}
	return string(b[:])
}
