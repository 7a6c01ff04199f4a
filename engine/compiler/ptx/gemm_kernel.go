package ptx

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The dedicated matmul kernels: one CTA computes a BM x BN tile of C for one batch, keeping
// the f32 accumulators in registers across the whole K loop. K advances 64 at a time (one
// 128-byte row of 16-bit elements); the tiles of A and B stream into shared memory through a
// ring of stages filled by 16-byte cp.async copies, each copy zero-filling where it lies
// outside the matrix (the Tile IR's masked loads with fill 0).
//
// Shared-memory layout of a stage (both paths): the 128-byte swizzle of the tensor-memory
// accelerator and of wgmma, written by hand. A is BM rows of 128 bytes (64 k), B is BN/64
// blocks of 64 rows (k) of 128 bytes (64 n); inside every 1024-byte group of 8 rows, 16-byte
// chunk c of row r sits at chunk position c ^ (r % 8). wgmma reads that layout through
// matrix descriptors (A K-major, B MN-major, 128-byte swizzle); ldmatrix reads it with the
// same XOR, and the XOR makes both the copies and the ldmatrix reads free of bank conflicts.
//
// Bits: every output element is a chain of tensor-core steps acc = acc + A[:,k:k+16] x
// B[k:k+16,:] for k = 0, 16, 32, ... over f32 accumulators, in increasing k, whatever the
// tiling; so the result does not depend on BM, BN or the stage count, and runs repeat bit for
// bit (no split K, no atomics). e4m3 operands (scaled_matmul): gemm_fp8.go.
const (
	gemmBK      = 64
	gemmThreads = 256
	swizzleRow  = 128 // bytes per swizzled row
)

// gemmCfg is one dedicated kernel's tiling.
type gemmCfg struct {
	path   string // "wgmma" (sm_90a) or "mma.sync"
	bm, bn int    // CTA tile: bm 128; bn 128 or 256
	stages int    // ring depth
	wait   int    // wgmma: groups left in flight after each issue (0 or 1)
	group  int    // m-tiles per group in the CTA order, so concurrent CTAs share B panels in L2
	fp8    bool   // e4m3 operands (scaled form): K-major B, 128 k per tile, promotion
	// fastAccum (fp8, a measurement knob, not f32 accumulation): no promotion, the tensor
	// core accumulates the whole K itself, as torch._scaled_mm's use_fast_accum=True.
	fastAccum bool
}

// bk is the k-tile depth: one 128-byte swizzled row of operand elements.
func (c gemmCfg) bk() int {
	if c.fp8 {
		return swizzleRow
	}
	return swizzleRow / 2
}

func (c gemmCfg) String() string {
	s := fmt.Sprintf("%s %dx%dx%d stages=%d", c.path, c.bm, c.bn, c.bk(), c.stages)
	if c.path == "wgmma" {
		s += fmt.Sprintf(" wait=%d", c.wait)
	}
	if c.fp8 {
		s += " e4m3"
	}
	if c.fastAccum {
		s += " fast-accum"
	}
	return s
}

// A is bm rows of 128 bytes; B is bn columns of bk 16-bit rows (bk*bn*2 bytes) or, K-major
// (fp8), bn rows of 128 bytes: the same size.
func (c gemmCfg) aBytes() int     { return c.bm * swizzleRow }
func (c gemmCfg) stageBytes() int { return c.aBytes() + c.bn*swizzleRow }

// sharedBytes is the ring plus 1 KiB of slack: the kernel rounds the dynamic shared-memory
// base up to 1024 bytes, where the swizzle pattern must start.
func (c gemmCfg) sharedBytes() int { return c.stages*c.stageBytes() + 1024 }

// prefetch is how many k-tiles are in flight ahead of the one being multiplied. A stage may
// be refilled once every warp is done reading it: mma.sync reads synchronously, so right
// after the next barrier; wgmma reads asynchronously, and a stage is free only once the
// group that read it has retired (wait groups later).
func (c gemmCfg) prefetch() int {
	if c.path == "wgmma" {
		return c.stages - 1 - c.wait
	}
	return c.stages - 1
}

func (c gemmCfg) valid() bool {
	if c.bm != 128 || (c.bn != 128 && c.bn != 256) || c.prefetch() < 1 || c.sharedBytes() > maxShared || c.group < 1 {
		return false
	}
	if c.fastAccum && !c.fp8 {
		return false
	}
	if c.promoting() { // 64 accumulators and 64 per promotion set a thread at bn 128; bn 256 would not fit
		return c.path == "wgmma" && c.bn == 128 && (c.wait == 0 || c.wait == 1)
	}
	if c.fp8 {
		return c.path == "wgmma" && (c.wait == 0 || c.wait == 1)
	}
	return c.path == "mma.sync" || (c.path == "wgmma" && (c.wait == 0 || c.wait == 1))
}

// defaultGemmCfg is the tiling used when the Tile IR's own tile is not one the dedicated
// kernels support (the default schedule's 64x64x32 is sized for the CPU).
func defaultGemmCfg(path string) gemmCfg {
	if path == "wgmma" {
		return gemmCfg{path: path, bm: 128, bn: 256, stages: 4, wait: 1, group: 8}
	}
	return gemmCfg{path: path, bm: 128, bn: 256, stages: 4, group: 8}
}

// gemmKernel emits the dedicated kernel for s with tiling c.
func gemmKernel(s gemmSpec, c gemmCfg, t Target, entry string, params int) *Module {
	k := &gemmGen{kgen: kgen{e: newEmitter(), dt: s.dt}, s: s, c: c, entry: entry}
	k.body()
	numPid := ceilDivInt(s.m, c.bm) * ceilDivInt(s.n, c.bn)
	arch := t.Arch()
	if c.path == "wgmma" {
		arch = "sm_90a"
	}
	what := fmt.Sprintf("dedicated matmul kernel (%s), %d x [%d,%d] x [%d,%d] %s", c, s.batch, s.m, s.k, s.k, s.n, s.dt)
	if s.scaled() {
		what = fmt.Sprintf("dedicated scaled fp8 matmul kernel (%s), [%d,%d] x [%d,%d]^T %s -> %s", c, s.m, s.k, s.n, s.k, s.dt, s.out)
	}
	text := k.moduleText(what,
		[3]int{numPid, s.batch, 1}, gemmThreads, c.sharedBytes(), t.PTXVersion, arch, entry, params)
	return &Module{PTX: text, Entry: entry, Grid: [3]int{numPid, s.batch, 1}, Threads: gemmThreads,
		SharedBytes: c.sharedBytes(), Path: c.path, Tile: c.String()}
}

// gemmGen writes one dedicated kernel.
type gemmGen struct {
	kgen
	s     gemmSpec
	c     gemmCfg
	entry string

	tid, lane, warp string
	base            string // 1024-aligned shared-memory base
	gA, gB, gC      string // global base of this CTA's batch
	gSA, gSB        string // scaled form: the scales' global addresses
	m0, n0          string
	acc             []string
	tmp             [][]string // fp8: promotion sets, each as acc

	// loader state, advanced by one k-tile per load
	aSmem, bSmem string   // this thread's byte offsets inside a stage
	aPtr, bPtr   string   // global address of this thread's first chunk of the next tile
	aRowOK       []string // per A copy: its row is inside M
	bRowOK       []string // K-major B: per copy, its row is inside N
	aK, bK       string   // next tile's k of this thread's A chunk and B row
	bColOK       string

	// compute state
	descA, descB string   // wgmma: descriptors at stage offset 0
	offA, offB   []string // mma.sync: ldmatrix byte offsets inside a stage
}

func (k *gemmGen) body() {
	s, c, e := k.s, k.c, k.e
	e.comment("dedicated matmul: %s", c)
	k.tid = k.mov32("%tid.x")
	k.lane = k.bin32("and.b32", k.tid, "31")
	k.warp = k.bin32("shr.u32", k.tid, "5")
	var glob []string
	params := []int{s.a, s.b, s.c}
	if s.scaled() {
		params = append(params, s.sa, s.sb)
	}
	for _, i := range params {
		raw := k.r("rd")
		k.op("ld.param.u64", raw, fmt.Sprintf("[%s_p%d]", k.entry, i))
		g := k.r("rd")
		k.op("cvta.to.global.u64", g, raw)
		glob = append(glob, g)
	}
	raw := k.mov32("tq_smem")
	k.base = k.bin32("and.b32", k.bin32("add.s32", raw, "1023"), "0xFFFFFC00")
	k.ctaTile()
	bz := k.mov32("%ctaid.y")
	batchOff := func(g string, stride, size int) string {
		if stride == 0 {
			return g
		}
		o := k.r("rd")
		k.op("mul.wide.s32", o, bz, k.imm(size*stride))
		r := k.r("rd")
		k.op("add.s64", r, g, o)
		return r
	}
	in, out := s.dt.Size(), s.out.Size()
	k.gA, k.gB, k.gC = batchOff(glob[0], s.batchA, in), batchOff(glob[1], s.batchB, in), batchOff(glob[2], s.batchC, out)
	if s.scaled() {
		k.gSA, k.gSB = glob[3], glob[4]
	}
	zeros := func() []string {
		rs := make([]string, c.bm*c.bn/gemmThreads)
		for i := range rs {
			rs[i] = k.r("f")
			k.op("mov.f32", rs[i], f32lit(0))
		}
		return rs
	}
	k.acc = zeros()
	if c.promoting() {
		for range c.sets() {
			k.tmp = append(k.tmp, zeros())
		}
	}
	k.loaderSetup()
	k.mainLoop()
	if c.path == "wgmma" {
		k.epilogueWgmma()
	} else {
		k.epilogueMma()
	}
	k.op("ret")
}

// ctaTile maps the linear CTA id to (m0, n0): groups of c.group m-tiles sweep all n-tiles
// m-fastest, so the CTAs running at once read a few A panels and each B panel from L2.
func (k *gemmGen) ctaTile() {
	s, c := k.s, k.c
	numM, numN := ceilDivInt(s.m, c.bm), ceilDivInt(s.n, c.bn)
	g := min(c.group, numM)
	pid := k.mov32("%ctaid.x")
	npg := g * numN
	grp := k.bin32("div.u32", pid, k.imm(npg))
	first := k.bin32("mul.lo.s32", grp, k.imm(g))
	left := k.bin32("sub.s32", k.mov32(k.imm(numM)), first)
	gsz := k.bin32("min.s32", left, k.imm(g))
	in := k.bin32("rem.u32", pid, k.imm(npg))
	pm := k.bin32("add.s32", first, k.bin32("rem.u32", in, gsz))
	pn := k.bin32("div.u32", in, gsz)
	k.m0 = k.bin32("mul.lo.s32", pm, k.imm(c.bm))
	k.n0 = k.bin32("mul.lo.s32", pn, k.imm(c.bn))
}

// loaderSetup computes this thread's fixed part of every copy. A: thread t copies chunk t%8
// of rows t/8 + 32i. B: a k-row has bn/8 chunks; thread t copies chunk t%(bn/8) of k-rows
// t/(bn/8) + i*(256/(bn/8)).
func (k *gemmGen) loaderSetup() {
	s, c := k.s, k.c
	size := s.dt.Size()
	chunkShift := map[int]string{1: "4", 2: "3"}[size] // elements per 16-byte chunk: 16 or 8
	rowA := k.bin32("shr.u32", k.tid, "3")
	chA := k.bin32("and.b32", k.tid, "7")
	k.aSmem = k.swz(rowA, chA)
	mRow := k.bin32("add.s32", k.m0, rowA)
	k.aK = k.bin32("shl.b32", chA, chunkShift)
	k.aPtr = k.addrOf(k.gA, mRow, s.lda, k.aK, size)
	for i := 0; i < c.bm/32; i++ {
		p := k.r("p")
		k.op("setp.lt.s32", p, mRow, k.imm(s.m-32*i))
		k.aRowOK = append(k.aRowOK, p)
	}
	if s.kMajorB {
		// B as A: thread t copies chunk t%8 (the same k as its A chunk) of n-rows t/8 + 32i.
		k.bSmem = k.bin32("add.s32", k.aSmem, k.imm(c.aBytes()))
		nRow := k.bin32("add.s32", k.n0, rowA)
		k.bPtr = k.addrOf(k.gB, nRow, s.ldb, k.aK, size)
		for i := 0; i < c.bn/32; i++ {
			p := k.r("p")
			k.op("setp.lt.s32", p, nRow, k.imm(s.n-32*i))
			k.bRowOK = append(k.bRowOK, p)
		}
		return
	}

	cpr := c.bn / 8
	rowB := k.bin32("div.u32", k.tid, k.imm(cpr))
	ccB := k.bin32("rem.u32", k.tid, k.imm(cpr))
	atom := k.bin32("shr.u32", ccB, "3")
	chB := k.bin32("and.b32", ccB, "7")
	k.bSmem = k.mad32(atom, k.imm(c.bk()*swizzleRow), k.swz(rowB, chB))
	nCol := k.bin32("add.s32", k.n0, k.bin32("shl.b32", ccB, "3"))
	k.bPtr = k.elemAddr(k.gB, rowB, s.ldb, nCol)
	k.bColOK = k.r("p")
	k.op("setp.lt.s32", k.bColOK, nCol, k.imm(s.n))
	k.bK = rowB
}

// loadTile issues the copies of the next k-tile into the stage at byte offset stage and
// advances the loader; tiles past the end issue nothing but still commit (an empty group), so
// the wait counts stay uniform.
func (k *gemmGen) loadTile(stage, have string) {
	s, c, e := k.s, k.c, k.e
	skip := e.label()
	if have != "" {
		e.opIf("!"+have, "bra", skip)
	}
	stA := k.bin32("add.s32", k.bin32("add.s32", k.base, stage), k.aSmem)
	kOK := k.r("p")
	k.op("setp.lt.s32", kOK, k.aK, k.imm(s.k))
	size := s.dt.Size()
	rowCopies := func(st, ptr, fallback string, rowOK []string, ld int) {
		for i, r := range rowOK {
			ok := k.r("p")
			k.op("and.pred", ok, r, kOK)
			src := k.r("rd")
			k.op("add.s64", src, ptr, itoa64(int64(size*32*i*ld)))
			dst := k.bin32("add.s32", st, k.imm(32*swizzleRow*i))
			k.copy16(dst, src, ok, fallback)
		}
	}
	rowCopies(stA, k.aPtr, k.gA, k.aRowOK, s.lda)
	if s.kMajorB {
		rowCopies(k.bin32("add.s32", k.bin32("add.s32", k.base, stage), k.bSmem), k.bPtr, k.gB, k.bRowOK, s.ldb)
		e.place(skip)
		k.op("add.s64", k.aPtr, k.aPtr, itoa(swizzleRow))
		k.op("add.s64", k.bPtr, k.bPtr, itoa(swizzleRow))
		k.op("add.s32", k.aK, k.aK, k.imm(c.bk()))
		k.op("cp.async.commit_group")
		return
	}
	stB := k.bin32("add.s32", k.bin32("add.s32", k.base, stage), k.bin32("add.s32", k.bSmem, k.imm(c.aBytes())))
	rows := gemmThreads / (c.bn / 8)
	for i := 0; i < c.bk()/rows; i++ {
		rowOK := k.r("p")
		k.op("setp.lt.s32", rowOK, k.bK, k.imm(s.k-rows*i))
		ok := k.r("p")
		k.op("and.pred", ok, rowOK, k.bColOK)
		src := k.r("rd")
		k.op("add.s64", src, k.bPtr, itoa64(int64(2*rows*i*s.ldb)))
		dst := k.bin32("add.s32", stB, k.imm(rows*swizzleRow*i))
		k.copy16(dst, src, ok, k.gB)
	}
	e.place(skip)
	// Advance to the next tile (harmless past the end: nothing is issued there).
	k.op("add.s64", k.aPtr, k.aPtr, "128")
	k.op("add.s64", k.bPtr, k.bPtr, itoa64(int64(2*c.bk()*s.ldb)))
	k.op("add.s32", k.aK, k.aK, k.imm(c.bk()))
	k.op("add.s32", k.bK, k.bK, k.imm(c.bk()))
	k.op("cp.async.commit_group")
}

// wrapAdd advances a stage byte offset by one stage, wrapping at the ring's end.
func (k *gemmGen) wrapAdd(off string) {
	c := k.c
	k.op("add.s32", off, off, k.imm(c.stageBytes()))
	p := k.r("p")
	k.op("setp.ge.s32", p, off, k.imm(c.stages*c.stageBytes()))
	k.op("selp.b32", off, "0", off, p)
}

// mainLoop: prefetch P tiles; then per k-tile: wait for its copies, barrier (its data is
// visible to all, and the stage refilled next is no longer read by anyone), refill, multiply.
func (k *gemmGen) mainLoop() {
	s, c, e := k.s, k.c, k.e
	kt := ceilDivInt(s.k, c.bk())
	p := c.prefetch()
	for t := 0; t < p; t++ {
		if t < kt {
			k.loadTile(k.imm(t*c.stageBytes()), "")
		} else {
			k.op("cp.async.commit_group")
		}
	}
	compOff := k.mov32("0")
	loadOff := k.mov32(k.imm(p * c.stageBytes()))
	if p >= c.stages {
		panic("gemm: prefetch must leave a stage free")
	}
	it := k.mov32("0")
	k.computeSetup()
	// fp8 with two promotion sets unrolls the loop twice, so that each copy names its set.
	sets := 1
	if c.promoting() {
		sets = c.sets()
	}
	head, done := e.label(), ""
	if sets > 1 {
		done = e.label()
	}
	e.place(head)
	for u := range sets {
		k.op("cp.async.wait_group", k.imm(p-1))
		if c.path == "wgmma" {
			// cp.async writes through the generic proxy; wgmma reads through the async proxy.
			k.op("fence.proxy.async.shared::cta")
		}
		k.op("bar.sync", "0")
		have := k.r("p")
		k.op("setp.lt.s32", have, it, k.imm(kt-p))
		k.loadTile(loadOff, have)
		k.wrapAdd(loadOff)
		if c.path == "wgmma" {
			k.computeWgmma(compOff, u)
		} else {
			k.computeMma(compOff)
		}
		k.wrapAdd(compOff)
		k.op("add.s32", it, it, "1")
		more := k.r("p")
		k.op("setp.lt.s32", more, it, k.imm(kt))
		if u < sets-1 {
			e.opIf("!"+more, "bra", done)
		} else {
			e.opIf(more, "bra", head)
		}
	}
	if done != "" {
		e.place(done)
	}
	if c.path == "wgmma" {
		k.op("wgmma.wait_group.sync.aligned", "0")
	}
	if c.promoting() { // the last c.wait k-tiles are not added yet
		for t := max(kt-c.wait, 0); t < kt; t++ {
			k.promote(t % sets)
		}
	}
	k.op("cp.async.wait_all")
}

func (k *gemmGen) computeSetup() {
	if k.c.path == "wgmma" {
		k.wgmmaSetup()
	} else {
		k.mmaSetup()
	}
}

// storePair writes the two values of C[row, col..col+1] when the row and col are inside: one
// packed 32-bit word for a 16-bit C, two f32 for an f32 C (scaled form).
func (k *gemmGen) storePair(rowOK, colOK, addr, lo, hi string) {
	ok := k.r("p")
	k.op("and.pred", ok, rowOK, colOK)
	if k.s.out == numerics.F32 {
		k.e.opIf(ok, "st.global.v2.f32", "["+addr+"]", "{"+lo+","+hi+"}")
		return
	}
	w := k.packAs(k.s.out, lo, hi)
	k.e.opIf(ok, "st.global.b32", "["+addr+"]", w)
}
