package ptx

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// The dedicated attention kernel (sm_90a), flash-attention style: one CTA owns 128 query rows
// of one batch*head, split between two warpgroups of 64 rows, and streams the keys in tiles of
// 128. Per key tile a warpgroup computes S = Q K^T with wgmma (Q and K from shared memory),
// advances the running softmax of its rows in registers, and adds P V with a second wgmma
// whose A operand is P straight from registers (the accumulator layout of S is the register
// fragment layout of A). Nothing but Q, K, V and O touches global memory.
//
// Pipelining. Within a warpgroup, the scores of tile j are issued before the P V product of
// tile j-1, so the exponentials of tile j overlap that product on the tensor cores; the
// products of the two warpgroups interleave on the SM. K and V tiles arrive by 16-byte
// cp.async copies (zero-filled outside the matrices) into rings of attnCfg.stages slots in the
// 128-byte swizzle that wgmma's descriptors read; V runs one tile behind K, because the P V
// product of tile j-1 is still reading its slot while the scores of tile j are computed.
// In the lockstep form both warpgroups copy and meet at a CTA barrier per key tile; the default
// warp-specialised form (attn_ws.go) gives the copies to a third warpgroup and lets the two
// compute warpgroups take turns on the tensor cores (docs/PERF.md measures both).
//
// Numerics: f32 accumulation on the tensor cores, f32 running max and sum, P rounded to the
// storage dtype before P V (as the Tile IR's kernel does), exp computed as ex2.approx of
// s*scale*log2(e) - m*scale*log2(e) (one FMA per score). The order of the sums is fixed, so
// runs repeat bit for bit; it is not the CPU backend's order, and exp2 is not Go's exp: the
// results agree with the golden model within its tolerance, not bitwise.
//
// Rows whose running max is -Inf get P = 0 (a fully masked tile changes nothing), +Inf or NaN
// scores give NaN rows as the golden model does (max.NaN propagates a NaN).
const (
	attnBM      = 128 // query rows per CTA
	attnBN      = 128 // keys per tile
	attnThreads = 256
	attnBlock   = attnBM * swizzleRow // one 128-row block of 64 16-bit columns
)

// attnCfg is the kernel's tiling: the depth of the K and V rings, and whether a key tile's
// copies are issued after its tensor-core work (late) or before.
type attnCfg struct {
	stages int
	late   bool
	ws     bool   // warp-specialised: a copier warpgroup, compute warpgroups taking turns (attn_ws.go)
	diag   string // timing experiments only (never dispatched): noexp, nosoftmax, noloads, nopv
}

// has reports whether diagnostic cut d is on (diag is a comma-separated list).
func (c attnCfg) has(d string) bool { return strings.Contains(","+c.diag+",", ","+d+",") }

// threads is the CTA size: the two compute warpgroups, and in ws mode the copier.
func (c attnCfg) threads() int {
	if c.ws {
		return attnThreads + wsCopiers
	}
	return attnThreads
}

func (c attnCfg) String() string {
	s := fmt.Sprintf("wgmma %dx%d stages=%d", attnBM, attnBN, c.stages)
	if c.late {
		s += " late"
	}
	if c.ws {
		s += " ws"
	}
	if c.diag != "" {
		s += " diag=" + c.diag
	}
	return s
}

func blocks64(d int) int { return ceilDivInt(d, 64) }

func (s attnSpec) qBytes() int { return blocks64(s.d) * attnBlock }
func (s attnSpec) kSlot() int  { return blocks64(s.d) * attnBlock }
func (s attnSpec) vSlot() int  { return blocks64(s.dv) * attnBlock }
func (s attnSpec) sharedBytes(c attnCfg) int {
	n := s.qBytes() + c.stages*(s.kSlot()+s.vSlot()) + 1024
	if c.ws {
		n += 8 * wsBarriers(c)
	}
	return n
}

func (c attnCfg) valid(s attnSpec) bool {
	return c.stages >= 2 && s.sharedBytes(c) <= maxShared
}

// defaultAttnCfg is the measured best (docs/PERF.md): warp-specialised, a 2-deep ring (3 was
// slower). TESSERA_PTX_ATTN=lockstep picks the lockstep kernel (copies issued after the
// tensor-core work), TESSERA_PTX_ATTN_STAGES the ring depth, where they fit (A/B timings).
func defaultAttnCfg(s attnSpec) attnCfg {
	c := attnCfg{stages: 2, ws: true}
	if os.Getenv("TESSERA_PTX_ATTN") == "lockstep" || !c.valid(s) {
		c = attnCfg{stages: 2, late: true}
	}
	if n, err := strconv.Atoi(os.Getenv("TESSERA_PTX_ATTN_STAGES")); err == nil {
		if e := (attnCfg{stages: n, late: c.late, ws: c.ws}); e.valid(s) {
			return e
		}
	}
	return c
}

var attnOps = []string{
	"wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
	"shfl.sync.bfly.b32", "max.NaN.f32", "fma.rn.f32", "ex2.approx.ftz.f32", "setp.eq.f32", "not.pred",
	"setp.le.s32",
}

func init() {
	for _, op := range attnOps {
		knownOps[op] = true
	}
}

// attnKernel emits the dedicated kernel for s with ring depth c.
func attnKernel(s attnSpec, c attnCfg, t Target, entry string, params int) *Module {
	k := &attnGen{kgen: kgen{e: newEmitter(), dt: s.dt}, s: s, c: c, entry: entry}
	k.body()
	nq := ceilDivInt(s.sq, attnBM)
	text := k.moduleText(fmt.Sprintf("dedicated attention kernel (%s), %d x q[%d,%d] k[%d,%d] v[%d,%d] %s causal=%v",
		c, s.bh, s.sq, s.d, s.sk, s.d, s.sk, s.dv, s.dt, s.causal), [3]int{nq, s.bh, 1}, c.threads(), s.sharedBytes(c),
		t.PTXVersion, "sm_90a", entry, params)
	return &Module{PTX: text, Entry: entry, Grid: [3]int{nq, s.bh, 1}, Threads: c.threads(),
		SharedBytes: s.sharedBytes(c), Path: "wgmma", Tile: c.String()}
}

// attnGen writes one attention kernel.
type attnGen struct {
	kgen
	s     attnSpec
	c     attnCfg
	entry string

	tid, lane, warp, wg string
	base                string // 1024-aligned shared-memory base
	gQ, gK, gV, gO      string // global bases of this CTA's batch*head
	q0, nT              string // first query row; key tiles this CTA visits
	lim                 [2]string
	ws                  wsState

	// loader: this thread copies chunk tid%8 of rows tid/8 + 32i of every 64-column block
	sOff       string // its swizzled byte offset inside a block
	chunkCol   string // its first column
	kPtr, vPtr string // global address of its first chunk of the next K / V tile
	kRow, vRow string // that chunk's key row
	kIdx, vIdx string // index of the next K / V tile
	kLoad      string // byte offset of the K slot loaded next (V's is at the same slot index)
	vLoad      string

	descQ, descK, descV string // descriptors at this warpgroup's Q rows, K slot 0, V slot 0
	kComp, vComp        string // byte offsets of the slots read next
	pTrue, pFalse       string

	sAcc, oAcc []string // f32 scores (64 keys x 2 rows per thread) and output
	p          []string // P as 16-bit pairs: the A fragments of the P V product, 4 per 16 keys
	m, l       [2]string
	scaleLog2  string
}

func (k *attnGen) body() {
	s, c, e := k.s, k.c, k.e
	e.comment("dedicated attention: %s", c)
	k.tid = k.mov32("%tid.x")
	k.lane = k.bin32("and.b32", k.tid, "31")
	k.warp = k.bin32("shr.u32", k.tid, "5")
	k.wg = k.bin32("shr.u32", k.warp, "2")
	var glob [4]string
	for i, p := range []int{s.q, s.k, s.v, s.o} {
		raw := k.r("rd")
		k.op("ld.param.u64", raw, fmt.Sprintf("[%s_p%d]", k.entry, p))
		glob[i] = k.r("rd")
		k.op("cvta.to.global.u64", glob[i], raw)
	}
	raw := k.mov32("tq_smem")
	k.base = k.bin32("and.b32", k.bin32("add.s32", raw, "1023"), "0xFFFFFC00")
	bh := k.mov32("%ctaid.y")
	off := func(g string, elems int) string {
		o := k.r("rd")
		k.op("mul.wide.s32", o, bh, k.imm(2*elems))
		r := k.r("rd")
		k.op("add.s64", r, g, o)
		return r
	}
	k.gQ, k.gK, k.gV, k.gO = off(glob[0], s.sq*s.d), off(glob[1], s.sk*s.d), off(glob[2], s.sk*s.dv), off(glob[3], s.sq*s.dv)
	k.tiles()
	k.pTrue, k.pFalse = k.r("p"), k.r("p")
	k.op("setp.ne.u32", k.pTrue, k.tid, "0xFFFFFFFF")
	k.op("not.pred", k.pFalse, k.pTrue)
	k.state()
	k.loaderSetup()
	k.computeSetup()
	if c.ws {
		k.wsBody()
	} else {
		k.prologue()
		k.mainLoop()
		k.epilogue()
	}
	k.op("cp.async.wait_all")
	k.op("ret")
}

// tiles computes this CTA's query tile (the heaviest first when causal, so the long rows do
// not all start last), its key tile count and each thread's two mask limits: key j of row i
// is kept when j <= lim (lim = Sk-1, or min(i, Sk-1) when causal).
func (k *attnGen) tiles() {
	s := k.s
	nq := ceilDivInt(s.sq, attnBM)
	nk := ceilDivInt(s.sk, attnBN)
	qt := k.mov32("%ctaid.x")
	if s.causal {
		qt = k.bin32("sub.s32", k.mov32(k.imm(nq-1)), qt)
	}
	k.q0 = k.bin32("shl.b32", qt, "7")

	if s.causal {
		last := k.bin32("min.s32", k.bin32("add.s32", k.q0, k.imm(attnBM-1)), k.imm(s.sq-1))
		k.nT = k.bin32("min.s32", k.bin32("add.s32", k.bin32("shr.u32", last, "7"), "1"), k.imm(nk))
	} else {
		k.nT = k.mov32(k.imm(nk))
	}
	wl := k.bin32("and.b32", k.warp, "3")
	row := k.mad32(k.wg, "64", k.q0)
	row = k.mad32(wl, "16", row)
	row = k.bin32("add.s32", row, k.bin32("shr.u32", k.lane, "2"))
	for h := range 2 {
		r := row
		if h == 1 {
			r = k.bin32("add.s32", row, "8")
		}
		if s.causal {
			k.lim[h] = k.bin32("min.s32", r, k.imm(s.sk-1))
		} else {
			k.lim[h] = k.mov32(k.imm(s.sk - 1))
		}
	}
}

// state allocates the accumulators and the softmax state.
func (k *attnGen) state() {
	s := k.s
	for range attnBN / 2 {
		k.sAcc = append(k.sAcc, k.r("f"))
	}
	for range blocks64(s.dv) * 32 {
		r := k.r("f")
		k.op("mov.f32", r, f32lit(0))
		k.oAcc = append(k.oAcc, r)
	}
	for range attnBN / 16 * 4 {
		k.p = append(k.p, k.r("r"))
	}
	for h := range 2 {
		k.m[h], k.l[h] = k.r("f"), k.r("f")
		k.op("mov.f32", k.m[h], f32lit(float32(math.Inf(-1))))
		k.op("mov.f32", k.l[h], f32lit(0))
	}
	k.scaleLog2 = f32lit(float32(s.scale * math.Log2E))
}

// rowStep is how many rows one pass of the loader's threads copies (8 chunks a row): all 256,
// or in ws mode the copier's 128.
func (k *attnGen) rowStep() int {
	if k.c.ws {
		return wsCopiers / 8
	}
	return attnThreads / 8
}

// loaderRow is this thread's row inside a loader pass.
func (k *attnGen) loaderRow() string {
	return k.bin32("shr.u32", k.bin32("and.b32", k.tid, k.imm(8*k.rowStep()-1)), "3")
}

func (k *attnGen) loaderSetup() {
	s := k.s
	r := k.loaderRow()
	ch := k.bin32("and.b32", k.tid, "7")
	k.sOff = k.swz(r, ch)
	k.chunkCol = k.bin32("shl.b32", ch, "3")
	k.kRow, k.vRow = k.mov32(r), k.mov32(r)
	k.kPtr = k.elemAddr(k.gK, r, s.d, k.chunkCol)
	k.vPtr = k.elemAddr(k.gV, r, s.dv, k.chunkCol)
	k.kIdx, k.vIdx = k.mov32("0"), k.mov32("0")
	k.kLoad = k.mov32(k.imm(s.qBytes()))
	k.vLoad = k.mov32(k.imm(s.qBytes() + k.c.stages*s.kSlot()))
}

// copyTile issues the copies of one [128 x cols] tile at global ptr (this thread's first chunk,
// row index row, rows valid below limit, row stride ld elements) into the slot at byte offset
// slot, when have.
func (k *attnGen) copyTile(have, full, ptr, row string, rows, limit, ld, cols int, slot, fallback string) {
	e := k.e
	skip := e.label()
	if have != "" {
		e.opIf("!"+have, "bra", skip)
	}
	dst := k.bin32("add.s32", k.bin32("add.s32", k.base, slot), k.sOff)
	step := k.rowStep()
	if cols%64 == 0 && full != "" {
		// A tile wholly inside the matrix needs no masks: one instruction per copy.
		masked := e.label()
		e.opIf("!"+full, "bra", masked)
		for i := range rows / step {
			for b := range blocks64(cols) {
				k.op("cp.async.cg.shared.global", "["+dst+"+"+itoa(b*attnBlock+step*i*swizzleRow)+"]",
					"["+ptr+"+"+itoa(2*(step*i*ld+64*b))+"]", "16")
			}
		}
		e.opIf("", "bra", skip)
		e.place(masked)
	}
	var colOK []string
	for b := range blocks64(cols) {
		p := k.r("p")
		k.op("setp.lt.s32", p, k.chunkCol, k.imm(cols-64*b))
		colOK = append(colOK, p)
	}
	for i := range rows / step {
		rowOK := k.r("p")
		k.op("setp.lt.s32", rowOK, row, k.imm(limit-step*i))
		for b, cok := range colOK {
			ok := k.r("p")
			k.op("and.pred", ok, rowOK, cok)
			src := k.r("rd")
			k.op("add.s64", src, ptr, itoa64(int64(2*(step*i*ld+64*b))))
			k.copy16(k.bin32("add.s32", dst, k.imm(b*attnBlock+step*i*swizzleRow)), src, ok, fallback)
		}
	}
	e.place(skip)
}

// cmp returns a fresh predicate (a op b) for a .s32 setp form.
func (k *attnGen) cmp(op, a, b string) string {
	p := k.r("p")
	k.op("setp."+op+".s32", p, a, b)
	return p
}

// fullTile is the predicate "key tile idx lies wholly inside the keys".
func (k *attnGen) fullTile(idx string) string {
	end := k.bin32("shl.b32", k.bin32("add.s32", idx, "1"), "7")
	return k.cmp("le", end, k.imm(k.s.sk))
}

// loadK issues the next K tile (if the CTA visits it) and advances the K loader.
func (k *attnGen) loadK() {
	s := k.s
	have := k.r("p")
	k.op("setp.lt.s32", have, k.kIdx, k.nT)
	k.copyTile(have, k.fullTile(k.kIdx), k.kPtr, k.kRow, attnBN, s.sk, s.d, s.d, k.kLoad, k.gK)
	k.op("add.s64", k.kPtr, k.kPtr, itoa64(int64(2*attnBN*s.d)))
	k.op("add.s32", k.kRow, k.kRow, k.imm(attnBN))
	k.op("add.s32", k.kIdx, k.kIdx, "1")
	k.ring(k.kLoad, s.qBytes(), s.kSlot())
}

func (k *attnGen) loadV() {
	s := k.s
	have := k.r("p")
	k.op("setp.lt.s32", have, k.vIdx, k.nT)
	k.copyTile(have, k.fullTile(k.vIdx), k.vPtr, k.vRow, attnBN, s.sk, s.dv, s.dv, k.vLoad, k.gV)
	k.op("add.s64", k.vPtr, k.vPtr, itoa64(int64(2*attnBN*s.dv)))
	k.op("add.s32", k.vRow, k.vRow, k.imm(attnBN))
	k.op("add.s32", k.vIdx, k.vIdx, "1")
	k.ring(k.vLoad, s.qBytes()+k.c.stages*s.kSlot(), s.vSlot())
}

// ring advances a slot offset inside the ring starting at start, wrapping at its end.
func (k *attnGen) ring(off string, start, slot int) {
	k.op("add.s32", off, off, k.imm(slot))
	p := k.r("p")
	k.op("setp.ge.s32", p, off, k.imm(start+k.c.stages*slot))
	k.op("selp.b32", off, k.imm(start), off, p)
}

// prologue: group 0 holds Q and K_0, group g holds K_g and V_(g-1); the prologue commits
// groups 0..stages-2 and key tile j commits group j+stages-1, so at its start tile j waits
// for group j with stages-2 younger ones left in flight.
func (k *attnGen) prologue() {
	s := k.s
	r := k.loaderRow()
	qRow := k.bin32("add.s32", k.q0, r)
	qPtr := k.elemAddr(k.gQ, qRow, s.d, k.chunkCol)
	qFull := k.cmp("le", k.bin32("add.s32", k.q0, k.imm(attnBM)), k.imm(s.sq))
	k.copyTile("", qFull, qPtr, qRow, attnBM, s.sq, s.d, s.d, "0", k.gQ)
	k.loadK()
	k.op("cp.async.commit_group")
	for range k.c.stages - 2 {
		k.loadK()
		k.loadV()
		k.op("cp.async.commit_group")
	}
}

func (k *attnGen) computeSetup() {
	s := k.s
	const kMajor = descSwizzle128 | descSBO | descLBOA
	k.descQ = k.descriptor(k.mad32(k.wg, k.imm(64*swizzleRow), k.base), kMajor)
	k.descK = k.descriptor(k.base, kMajor)
	k.descV = k.descriptor(k.base, descSwizzle128|descSBO|uint64(attnBlock>>4)<<16)
	k.kComp = k.mov32(k.imm(s.qBytes()))
	k.vComp = k.mov32(k.imm(s.qBytes() + k.c.stages*s.kSlot()))
}

// descAt is desc advanced by the byte offset off (a register) plus the constant c.
func (k *attnGen) descAt(desc, off string, c int) string {
	d := k.r("rd")
	if off != "" {
		o := k.r("rd")
		k.op("cvt.u64.u32", o, k.bin32("shr.u32", off, "4"))
		k.op("add.s64", d, desc, o)
		desc = d
		d = k.r("rd")
	}
	k.op("add.s64", d, desc, k.imm(c>>4))
	return d
}

// issueScores issues S = Q K^T for the K slot at kComp: one m64n128k16 per 16 head columns,
// the first overwriting S.
func (k *attnGen) issueScores() {
	s := k.s
	opcode := "wgmma.mma_async.sync.aligned.m64n128k16.f32." + k.cvt16() + "." + k.cvt16()
	acc := "{" + joinRegs(k.sAcc) + "}"
	kd := k.descAt(k.descK, k.kComp, 0)
	for kk := range blocks64(s.d) * 4 {
		step := (kk/4)*attnBlock + 32*(kk%4)
		scale := k.pTrue
		if kk == 0 {
			scale = k.pFalse
		}
		k.op(opcode, acc, k.descAt(k.descQ, "", step), k.descAt(kd, "", step), scale, "1", "1", "0", "0")
	}
	k.op("wgmma.commit_group.sync.aligned")
}

// issuePV issues O += P V for the V slot at vComp: one m64n{dv}k16 per 16 keys, A = P from
// registers, V MN-major.
func (k *attnGen) issuePV() {
	s := k.s
	n := 64 * blocks64(s.dv)
	opcode := "wgmma.mma_async.sync.aligned.m64n" + itoa(n) + "k16.f32." + k.cvt16() + "." + k.cvt16()
	acc := "{" + joinRegs(k.oAcc) + "}"
	vd := k.descAt(k.descV, k.vComp, 0)
	for kk := range attnBN / 16 {
		a := "{" + joinRegs(k.p[4*kk:4*kk+4]) + "}"
		k.op(opcode, acc, a, k.descAt(vd, "", kk*16*swizzleRow), k.pTrue, "1", "1", "1")
	}
	k.op("wgmma.commit_group.sync.aligned")
	k.ring(k.vComp, s.qBytes()+k.c.stages*s.kSlot(), s.vSlot())
}

// waitTiles makes the copies of the oldest outstanding group visible to the whole CTA (and
// to wgmma's async proxy); the barrier also means every warpgroup is done with the slots the
// next copies overwrite.
func (k *attnGen) waitTiles() {
	k.op("cp.async.wait_group", k.imm(k.c.stages-2))
	k.op("fence.proxy.async.shared::cta")
	k.op("bar.sync", "0")
}

// mainLoop runs key tiles 0..nT-1; tile j issues its scores, then P V of tile j-1.
func (k *attnGen) mainLoop() {
	s := k.s
	mStart := k.maskStart()
	k.tileLoop(func(j string, first bool) {
		k.waitTiles()
		if !k.c.late {
			k.loadNext()
		}
		k.op("wgmma.fence.sync.aligned")
		k.issueScores()
		k.ring(k.kComp, s.qBytes(), s.kSlot())
		if !first && !k.c.has("nopv") {
			k.issuePV()
		}
		if k.c.late {
			k.loadNext()
		}
		if !first && !k.c.has("nopv") {
			k.op("wgmma.wait_group.sync.aligned", "1")
		} else {
			k.op("wgmma.wait_group.sync.aligned", "0")
		}
		alpha := k.probabilities(j, mStart)
		if !first {
			k.op("wgmma.wait_group.sync.aligned", "0")
		}
		k.rescaleAndPack(alpha)
	})
}

// tileLoop emits body for key tiles j = 0..nT-1: tile 0 peeled (first: no P V of a previous
// tile yet), the rest in a loop.
func (k *attnGen) tileLoop(body func(j string, first bool)) {
	e := k.e
	j := k.mov32("0")
	body(j, true)
	k.op("add.s32", j, j, "1")
	head, done := e.label(), e.label()
	e.place(head)
	e.opIf("!"+k.cmp("lt", j, k.nT), "bra", done)
	body(j, false)
	k.op("add.s32", j, j, "1")
	e.opIf("", "bra", head)
	e.place(done)
}

// probabilities masks tile j's scores where it needs it and turns them into probabilities,
// returning the rescale factor per row half.
func (k *attnGen) probabilities(j, mStart string) [2]string {
	e := k.e
	noMask := e.label()
	e.opIf("!"+k.cmp("ge", j, mStart), "bra", noMask)
	k.mask(j)
	e.place(noMask)
	return k.softmax()
}

// loadNext issues key tile j+stages-1 and value tile j+stages-2 as one group.
func (k *attnGen) loadNext() {
	if !k.c.has("noloads") {
		k.loadK()
		k.loadV()
	}
	k.op("cp.async.commit_group")
}

// maskStart is the first key tile that needs a mask: the ragged last tile, or the causal
// diagonal.
func (k *attnGen) maskStart() string {
	s := k.s
	m := k.mov32(k.imm(1 << 30))
	if s.sk%attnBN != 0 {
		k.op("mov.u32", m, k.imm(s.sk/attnBN))
	}
	if s.causal {
		k.op("min.s32", m, m, k.bin32("shr.u32", k.q0, "7"))
	}
	return m
}

// mask sets the scores of keys past each row's limit to -Inf. Thread element q of S is row
// half (q%4)/2, key 128j + 8(q/4) + 2(lane%4) + q%2.
func (k *attnGen) mask(j string) {
	kb := k.bin32("shl.b32", j, "7")
	kb = k.mad32(k.bin32("and.b32", k.lane, "3"), "2", kb)
	var room [2]string
	for h := range 2 {
		room[h] = k.bin32("sub.s32", k.lim[h], kb)
	}
	ninf := f32lit(float32(math.Inf(-1)))
	for q, v := range k.sAcc {
		p := k.r("p")
		k.op("setp.lt.s32", p, room[(q%4)/2], k.imm(8*(q/4)+q%2))
		k.op("selp.f32", v, ninf, v, p)
	}
}

// fold combines xs pairwise (a tree, for instruction-level parallelism; max is exact and the
// sum's tree is fixed, so the bits do not depend on scheduling).
func (k *attnGen) fold(xs []string, opcode string) string {
	for len(xs) > 1 {
		var next []string
		for i := 0; i+1 < len(xs); i += 2 {
			r := k.r("f")
			k.op(opcode, r, xs[i], xs[i+1])
			next = append(next, r)
		}
		if len(xs)%2 == 1 {
			next = append(next, xs[len(xs)-1])
		}
		xs = next
	}
	return xs[0]
}

// shfl returns f of lane ^ mask (butterfly shuffle through .b32 registers).
func (k *attnGen) shfl(f, mask string) string {
	b := k.r("r")
	k.op("mov.b32", b, f)
	o := k.r("r")
	k.op("shfl.sync.bfly.b32", o, b, mask, "31", "0xFFFFFFFF")
	r := k.r("f")
	k.op("mov.b32", r, o)
	return r
}

// rowHalf returns the elements of S of row half h.
func (k *attnGen) rowHalf(h int) []string {
	var out []string
	for q, v := range k.sAcc {
		if (q%4)/2 == h {
			out = append(out, v)
		}
	}
	return out
}

// softmax turns S into exp2 probabilities in place and advances m and l; it returns alpha per
// row half. A row's four threads (lanes 4g..4g+3) hold its 128 keys; each keeps a partial l
// (alpha is the same for the four), summed across them once at the end.
func (k *attnGen) softmax() [2]string {
	var alpha [2]string
	if k.c.has("nosoftmax") {
		return [2]string{f32lit(1), f32lit(1)}
	}
	for h := range 2 {
		xs := k.rowHalf(h)
		mx := k.fold(xs, "max.NaN.f32")
		for _, sh := range []string{"1", "2"} {
			n := k.r("f")
			k.op("max.NaN.f32", n, mx, k.shfl(mx, sh))
			mx = n
		}
		mNew := k.r("f")
		k.op("max.NaN.f32", mNew, k.m[h], mx)
		// mc = mNew*scale*log2e, or 0 where mNew = -Inf (then every P is exp2(-Inf) = 0).
		mc, scaled := k.r("f"), k.r("f")
		k.op("mul.rn.f32", scaled, mNew, k.scaleLog2)
		isInf := k.r("p")
		k.op("setp.eq.f32", isInf, mNew, f32lit(float32(math.Inf(-1))))
		k.op("selp.f32", mc, f32lit(0), scaled, isInf)
		neg := k.r("f")
		k.op("neg.f32", neg, mc)
		t := k.r("f")
		k.op("fma.rn.f32", t, k.m[h], k.scaleLog2, neg)
		alpha[h] = k.r("f")
		k.op("ex2.approx.ftz.f32", alpha[h], t)
		k.op("mov.f32", k.m[h], mNew)
		for _, v := range xs {
			k.op("fma.rn.f32", v, v, k.scaleLog2, neg)
			if !k.c.has("noexp") {
				k.op("ex2.approx.ftz.f32", v, v)
			}
		}
		sum := k.fold(xs, "add.rn.f32")
		k.op("fma.rn.f32", k.l[h], k.l[h], alpha[h], sum)
	}
	return alpha
}

// rescaleAndPack scales O by alpha and packs P into the A fragments of the next P V: pair
// 4kk+i of P holds S elements 8kk+2i and 8kk+2i+1.
func (k *attnGen) rescaleAndPack(alpha [2]string) {
	for q, v := range k.oAcc {
		k.op("mul.rn.f32", v, v, alpha[(q%4)/2])
	}
	for i := range k.p {
		k.op("cvt.rn."+k.cvt16()+"x2.f32", k.p[i], k.sAcc[2*i+1], k.sAcc[2*i])
	}
}

// epilogue: the last tile's P V, then O / l stored.
func (k *attnGen) epilogue() {
	k.waitTiles()
	k.op("wgmma.fence.sync.aligned")
	k.issuePV()
	k.op("wgmma.wait_group.sync.aligned", "0")
	k.store()
}

// store writes O / l for the rows and columns inside.
func (k *attnGen) store() {
	s := k.s
	var sum [2]string
	for h := range 2 {
		l := k.l[h]
		for _, sh := range []string{"1", "2"} {
			n := k.r("f")
			k.op("add.rn.f32", n, l, k.shfl(l, sh))
			l = n
		}
		sum[h] = l
	}
	out := make([]string, len(k.oAcc))
	for q, v := range k.oAcc {
		out[q] = k.r("f")
		k.op("div.rn.f32", out[q], v, sum[(q%4)/2])
	}
	wl := k.bin32("and.b32", k.warp, "3")
	row := k.mad32(k.wg, "64", k.q0)
	row = k.mad32(wl, "16", row)
	row = k.bin32("add.s32", row, k.bin32("shr.u32", k.lane, "2"))
	col := k.bin32("shl.b32", k.bin32("and.b32", k.lane, "3"), "1")
	ok0, ok1 := k.r("p"), k.r("p")
	k.op("setp.lt.s32", ok0, row, k.imm(s.sq))
	k.op("setp.lt.s32", ok1, row, k.imm(s.sq-8))
	a0 := k.elemAddr(k.gO, row, s.dv, col)
	a1 := k.r("rd")
	k.op("add.s64", a1, a0, itoa64(int64(2*8*s.dv)))
	for i := range len(out) / 4 {
		colOK := k.r("p")
		k.op("setp.lt.s32", colOK, col, k.imm(s.dv-8*i))
		for h, a := range []string{a0, a1} {
			ok := k.r("p")
			k.op("and.pred", ok, []string{ok0, ok1}[h], colOK)
			w := k.pack(out[4*i+2*h], out[4*i+2*h+1])
			k.e.opIf(ok, "st.global.b32", "["+a+"+"+itoa(2*8*i)+"]", w)
		}
	}
}
