package ptx

import (
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// mmaTensor runs an MMA on tensor cores: the [M,N] accumulator is cut into 16x8 tiles, dealt
// to the warps round robin; a warp loads its tile's f32 accumulator fragment from shared
// memory, steps through K sixteen at a time with ldmatrix (A as stored, B transposed on the
// fly, both from the 16-bit operand registers) and mma.sync.m16n8k16, and stores the fragment
// back. Every 16 products are summed inside the tensor core in its own order, so the bits
// differ from the CPU backend's one-product-at-a-time f32 sum (docs/ptx.md), but not from run
// to run.
func (g *gen) mmaTensor(x tile.MMA) {
	e := g.e
	mm, kk, nn := g.shapes[x.A][0], g.shapes[x.A][1], g.shapes[x.B][1]
	tilesN := nn / 8
	lane, warp := g.laneWarp()
	gid, tig := g.e.reg("r"), g.e.reg("r")
	e.op("shr.u32", gid, lane, "2")
	e.op("and.b32", tig, lane, "3")
	// ldmatrix row addresses: lane l feeds row (l&7) + 8*((l>>3)&1) of the block, at column
	// offset 8*(l>>4) for A (the x4 load's third and fourth matrices are A's k 8..15).
	l7, l3, l4 := g.e.reg("r"), g.e.reg("r"), g.e.reg("r")
	e.op("and.b32", l7, lane, "7")
	e.op("bfe.u32", l3, lane, "3", "1")
	e.op("shr.u32", l4, lane, "4")
	rowInBlock := g.e.reg("r")
	e.op("mad.lo.s32", rowInBlock, l3, "8", l7)
	aCol := g.mul32(l4, 8)

	t := g.e.reg("r")
	e.op("mov.u32", t, warp)
	head, done := e.label(), e.label()
	e.place(head)
	p := e.reg("p")
	e.op("setp.ge.u32", p, t, itoa((mm/16)*tilesN))
	e.opIf(p, "bra", done)
	tm, tn := g.e.reg("r"), g.e.reg("r")
	e.op("div.u32", tm, t, itoa(tilesN))
	e.op("rem.u32", tn, t, itoa(tilesN))
	m0, n0 := g.mul32(tm, 16), g.mul32(tn, 8)
	r0 := g.add32(m0, gid)
	r1 := g.add32(r0, "8")
	col := g.e.reg("r")
	e.op("mad.lo.s32", col, tig, "2", n0)
	idx := []string{g.lin(r0, nn, col), "", g.lin(r1, nn, col), ""}
	idx[1], idx[3] = g.add32(idx[0], "1"), g.add32(idx[2], "1")
	c := make([]string, 4)
	for i := range c {
		c[i] = g.read(x.Acc, idx[i]).reg
	}
	// Byte addresses of this lane's ldmatrix rows at k0 = 0; each K step adds 32 bytes to A's
	// and 16 rows of B.
	aRow := g.add32(m0, rowInBlock)
	aAddr := g.e.reg("r")
	e.op("mad.lo.s32", aAddr, g.lin(aRow, kk, aCol), "2", g.regBase(x.A))
	bAddr := g.e.reg("r")
	e.op("mad.lo.s32", bAddr, g.lin(rowInBlock, nn, n0), "2", g.regBase(x.B))
	kind := "bf16"
	if g.lay.half[x.A] == numerics.F16 {
		kind = "f16"
	}
	acc := "{" + strings.Join(c, ",") + "}"
	g.count(0, kk/16, func(ks string) {
		a := []string{e.reg("r"), e.reg("r"), e.reg("r"), e.reg("r")}
		b := []string{e.reg("r"), e.reg("r")}
		ao, bo := g.e.reg("r"), g.e.reg("r")
		e.op("mad.lo.s32", ao, ks, "32", aAddr)
		e.op("mad.lo.s32", bo, ks, itoa(16*nn*2), bAddr)
		e.op("ldmatrix.sync.aligned.m8n8.x4.shared.b16", "{"+strings.Join(a, ",")+"}", "["+ao+"]")
		e.op("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16", "{"+strings.Join(b, ",")+"}", "["+bo+"]")
		e.op("mma.sync.aligned.m16n8k16.row.col.f32."+kind+"."+kind+".f32", acc, "{"+strings.Join(a, ",")+"}", "{"+strings.Join(b, ",")+"}", acc)
	})
	for i := range c {
		g.write(x.Acc, idx[i], val{c[i], true})
	}
	e.op("add.s32", t, t, itoa(g.threads/32))
	e.op("bra", head)
	e.place(done)
	g.usedTensorCores = true
}

// laneWarp returns the lane and warp index registers, computed once in the prologue.
func (g *gen) laneWarp() (string, string) {
	if g.lane == "" {
		g.lane, g.warp = g.e.reg("r"), g.e.reg("r")
		g.pro.op("and.b32", g.lane, g.tid, "31")
		g.pro.op("shr.u32", g.warp, g.tid, "5")
	}
	return g.lane, g.warp
}
