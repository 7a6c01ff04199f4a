package ptx

// The mma.sync compute side (sm_80 and up): 8 warps in a 2 x 4 grid, each owning a 64 x bn/4
// block of the tile as 4 x (bn/32) m16n8 accumulator fragments. Per 16 k a warp loads its A
// fragments with ldmatrix.x4 and its B fragments with ldmatrix.x4.trans from the swizzled
// stage and issues one mma.sync.m16n8k16 per fragment.

const mmaTilesM = 4 // m16 tiles per warp (64 rows)

func (k *gemmGen) warpN() int { return k.c.bn / 4 }

func (k *gemmGen) mmaSetup() {
	wm := k.bin32("shr.u32", k.warp, "2")
	wn := k.bin32("and.b32", k.warp, "3")
	l15 := k.bin32("and.b32", k.lane, "15")
	l4 := k.bin32("shr.u32", k.lane, "4")
	// A: lanes 0-15 address rows 0-15 at k chunk 2j, lanes 16-31 the same rows at chunk 2j+1.
	rowA := k.mad32(wm, "64", l15)
	for j := 0; j < gemmBK/16; j++ {
		ch := k.bin32("add.s32", l4, k.imm(2*j))
		k.offA = append(k.offA, k.swz(rowA, ch))
	}
	// B: lanes 0-15 address k-rows 0-15 of 8-column chunk cn, lanes 16-31 of chunk cn+1.
	for np := 0; np < k.warpN()/16; np++ {
		cn := k.mad32(wn, k.imm(k.warpN()/8), k.bin32("add.s32", l4, k.imm(2*np)))
		atom := k.bin32("shr.u32", cn, "3")
		ch := k.bin32("and.b32", cn, "7")
		off := k.mad32(atom, k.imm(gemmBK*swizzleRow), k.swz(l15, ch))
		k.offB = append(k.offB, k.bin32("add.s32", off, k.imm(k.c.aBytes())))
	}
}

func (k *gemmGen) computeMma(stage string) {
	st := k.bin32("add.s32", k.base, stage)
	var bAddr []string
	for _, o := range k.offB {
		bAddr = append(bAddr, k.bin32("add.s32", st, o))
	}
	ni := k.warpN() / 8
	opcode := "mma.sync.aligned.m16n8k16.row.col.f32." + k.cvt16() + "." + k.cvt16() + ".f32"
	for j := 0; j < gemmBK/16; j++ {
		aAddr := k.bin32("add.s32", st, k.offA[j])
		a := make([][]string, mmaTilesM)
		for mi := range a {
			a[mi] = []string{k.r("r"), k.r("r"), k.r("r"), k.r("r")}
			k.op("ldmatrix.sync.aligned.m8n8.x4.shared.b16", "{"+joinRegs(a[mi])+"}", "["+aAddr+"+"+itoa(16*swizzleRow*mi)+"]")
		}
		b := make([][]string, len(bAddr))
		for np := range b {
			b[np] = []string{k.r("r"), k.r("r"), k.r("r"), k.r("r")}
			k.op("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", "{"+joinRegs(b[np])+"}", "["+bAddr[np]+"+"+itoa(16*swizzleRow*j)+"]")
		}
		for mi := 0; mi < mmaTilesM; mi++ {
			for n := 0; n < ni; n++ {
				d := "{" + joinRegs(k.acc[(mi*ni+n)*4:(mi*ni+n)*4+4]) + "}"
				bb := "{" + b[n/2][2*(n%2)] + "," + b[n/2][2*(n%2)+1] + "}"
				k.op(opcode, d, "{"+joinRegs(a[mi])+"}", bb, d)
			}
		}
	}
}

// epilogueMma stores the accumulators: fragment (mi, n) of warp (wm, wn) covers rows
// 64wm + 16mi + l/4 (+8) and cols (bn/4)wn + 8n + 2(l%4) (+1).
func (k *gemmGen) epilogueMma() {
	wm := k.bin32("shr.u32", k.warp, "2")
	wn := k.bin32("and.b32", k.warp, "3")
	gid := k.bin32("shr.u32", k.lane, "2")
	col := k.mad32(wn, k.imm(k.warpN()), k.n0)
	col = k.mad32(k.bin32("and.b32", k.lane, "3"), "2", col)
	ni := k.warpN() / 8
	for mi := 0; mi < mmaTilesM; mi++ {
		r := k.mad32(wm, "64", k.m0)
		row := k.bin32("add.s32", k.bin32("add.s32", r, gid), k.imm(16*mi))
		k.storeRows(row, col, func(n int) (int, [4]string) {
			i := (mi*ni + n) * 4
			return 8 * n, [4]string{k.acc[i], k.acc[i+1], k.acc[i+2], k.acc[i+3]}
		}, ni)
	}
}
