package ptx

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// TMA mode of the attention kernel (attnCfg.tma). The copies of K and V are the kernel's bound
// (docs/PERF.md: every CTA streams its head's whole K and V from L2). Here two CTAs of a
// cluster, the two halves of a pair of query tiles, share them: each copies half the rows of
// every K and V tile with the tensor memory accelerator and multicasts it into both CTAs'
// shared memory, halving the L2 traffic. One thread per CTA issues the copies; the rest of the
// kernel is the lockstep kernel's compute.
//
// Synchronisation, per ring slot s (of K and of V), with mbarriers:
//
//	full[s]   the leader's arrive.expect_tx (the tile's bytes from both CTAs) + the bulk
//	          copies' complete_tx; every thread waits on it before reading the slot
//	empty[s]  lane 0 of every compute warp of both CTAs arrives (16 in all) once its warp is
//	          done reading the slot; the producer waits on it before copying into the slot again
//
// Tile t is use n = t/stages of slot t%stages, so its waits test phase parity n&1. Both CTAs
// visit the same key tiles (those of the pair's later query tile: on the earlier one the extra
// tile is wholly masked, which changes nothing), and a cluster barrier at the start (barriers
// initialised) and at the end (no remote arrival or copy may reach an exited CTA) bracket it.
// With an odd number of query tiles the last pair has a phantom CTA whose rows are all past
// Sq: it computes on zeros and stores nothing.

const attnCluster = 2

var attnTMAOps = []string{
	"mbarrier.init.shared::cta.b64", "fence.mbarrier_init.release.cluster",
	"barrier.cluster.arrive.release.aligned", "barrier.cluster.wait.acquire.aligned",
	"fence.proxy.tensormap::generic.acquire.gpu", "mbarrier.arrive.expect_tx.shared::cta.b64",
	"cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster",
	"mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.shared::cta.b64", "mapa.shared::cluster.u32",
	"mbarrier.arrive.release.cluster.shared::cluster.b64", "setp.eq.u32", "setp.ge.u32",
	"setmaxnreg.inc.sync.aligned.u32", "setmaxnreg.dec.sync.aligned.u32",
}

func init() {
	for _, op := range attnTMAOps {
		knownOps[op] = true
	}
}

// Barrier kinds, each with one barrier per ring slot.
const (
	barFullK = iota
	barFullV
	barEmptyK
	barEmptyV
	barKinds
)

type tmaState struct {
	rank, peer   string
	leader       string // predicate: lane 0 of the producer warp
	producer     string // predicate: the producer warpgroup
	lane0        string
	mask         string // .b16 multicast mask: both CTAs
	tmapK, tmapV string
	bars         string // shared address of barrier 0
	bh           string
}

func (s attnSpec) barOffset(c attnCfg) int { return s.qBytes() + c.stages*(s.kSlot()+s.vSlot()) }

// tmaMaps are the descriptors the kernel reads, in parameter order after the Tile IR's.
func (s attnSpec) tmaMaps() []TensorMap {
	m := func(param, cols int) TensorMap {
		return TensorMap{Param: param, F16: s.dt == numerics.F16, Dims: []uint64{uint64(cols), uint64(s.sk), uint64(s.bh)},
			Strides: []uint64{uint64(2 * cols), uint64(2 * cols * s.sk)}, Box: []uint32{64, attnBN / attnCluster, 1}}
	}
	return []TensorMap{m(s.k, s.d), m(s.v, s.dv)}
}

// barAddr is the shared address of the barrier of kind for ring slot slot (a register).
func (k *attnGen) barAddr(kind int, slot string) string {
	return k.mad32(slot, "8", k.bin32("add.s32", k.tm.bars, k.imm(8*kind*k.c.stages)))
}

// slotOf is t mod stages (the ring slot of key tile t); useOf's low bit is the phase parity of
// that slot's use by tile t.
func (k *attnGen) slotOf(t string) string { return k.bin32("rem.u32", t, k.imm(k.c.stages)) }

func (k *attnGen) parityOf(t string) string {
	return k.bin32("and.b32", k.bin32("div.u32", t, k.imm(k.c.stages)), "1")
}

func (k *attnGen) tmaSetup(params int) {
	t := &k.tm
	t.rank = k.mov32("%cluster_ctarank")
	t.peer = k.bin32("xor.b32", t.rank, "1")
	t.leader, t.lane0, t.producer = k.r("p"), k.r("p"), k.r("p")
	k.op("setp.eq.u32", t.leader, k.tid, k.imm(attnThreads))
	k.op("setp.eq.u32", t.lane0, k.lane, "0")
	k.op("setp.ge.u32", t.producer, k.tid, k.imm(attnThreads))
	t.mask = k.r("h")
	k.op("mov.b16", t.mask, "3")
	t.tmapK, t.tmapV = k.r("rd"), k.r("rd")
	k.op("ld.param.u64", t.tmapK, fmt.Sprintf("[%s_p%d]", k.entry, params))
	k.op("ld.param.u64", t.tmapV, fmt.Sprintf("[%s_p%d]", k.entry, params+1))
	t.bh = k.mov32("%ctaid.y")
	t.bars = k.bin32("add.s32", k.base, k.imm(k.s.barOffset(k.c)))
	k.e.opIf(t.leader, "fence.proxy.tensormap::generic.acquire.gpu", "["+t.tmapK+"]", "128")
	k.e.opIf(t.leader, "fence.proxy.tensormap::generic.acquire.gpu", "["+t.tmapV+"]", "128")
	for i := range barKinds * k.c.stages {
		n := "1"
		if i/k.c.stages >= barEmptyK {
			n = itoa(attnCluster * attnThreads / 32)
		}
		k.e.opIf(t.leader, "mbarrier.init.shared::cta.b64", "["+t.bars+"+"+itoa(8*i)+"]", n)
	}
	k.e.opIf(t.leader, "fence.mbarrier_init.release.cluster")
	k.clusterSync()
}

func (k *attnGen) clusterSync() {
	k.op("barrier.cluster.arrive.release.aligned")
	k.op("barrier.cluster.wait.acquire.aligned")
}

// tmaIssue copies this CTA's half of key tile t (rows 64*rank.. of the tile) of K (v false) or
// V into its ring slot of both CTAs, when have.
func (k *attnGen) tmaIssue(v bool, t, have string) {
	s, tm := k.s, &k.tm
	cols, ring, slotBytes, tmap, full := s.d, s.qBytes(), s.kSlot(), tm.tmapK, barFullK
	if v {
		cols, ring, slotBytes, tmap, full = s.dv, s.qBytes()+k.c.stages*s.kSlot(), s.vSlot(), tm.tmapV, barFullV
	}
	slot := k.slotOf(t)
	go_ := k.r("p")
	k.op("and.pred", go_, tm.leader, have)
	fb := k.barAddr(full, slot)
	st := k.r("rd")
	k.e.opIf(go_, "mbarrier.arrive.expect_tx.shared::cta.b64", st, "["+fb+"]", itoa(blocks64(cols)*attnBlock))
	half := attnBN / attnCluster
	dst := k.mad32(slot, k.imm(slotBytes), k.bin32("add.s32", k.base, k.imm(ring)))
	dst = k.mad32(tm.rank, k.imm(half*swizzleRow), dst)
	row := k.mad32(tm.rank, k.imm(half), k.bin32("shl.b32", t, "7"))
	for b := range blocks64(cols) {
		k.e.opIf(go_, "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster",
			"["+dst+"+"+itoa(b*attnBlock)+"]", fmt.Sprintf("[%s, {%d, %s, %s}]", tmap, 64*b, row, tm.bh), "["+fb+"]", tm.mask)
	}
}

// tmaWait spins until the phase of tile t's use of its slot's barrier of kind base completes;
// pred limits the waiting threads ("" = all).
func (k *attnGen) tmaWait(pred string, base int, t string) {
	e := k.e
	addr := k.barAddr(base, k.slotOf(t))
	parity := k.parityOf(t)
	skip, loop := e.label(), e.label()
	if pred != "" {
		e.opIf("!"+pred, "bra", skip)
	}
	e.place(loop)
	done := k.r("p")
	k.op("mbarrier.try_wait.parity.shared::cta.b64", done, "["+addr+"]", parity)
	e.opIf("!"+done, "bra", loop)
	e.place(skip)
}

// tmaRelease: this warp is done reading the slot of tile t: arrive on both CTAs' empty barrier.
func (k *attnGen) tmaRelease(base int, t string) {
	tm := &k.tm
	addr := k.barAddr(base, k.slotOf(t))
	st := k.r("rd")
	k.e.opIf(tm.lane0, "mbarrier.arrive.shared::cta.b64", st, "["+addr+"]")
	remote := k.r("r")
	k.op("mapa.shared::cluster.u32", remote, addr, tm.peer)
	k.e.opIf(tm.lane0, "mbarrier.arrive.release.cluster.shared::cluster.b64", "_", "["+remote+"]")
}

// tmaPrologue: Q by cp.async from the compute threads, made visible to wgmma among them (named
// barrier 1: the producer warp takes another path).
func (k *attnGen) tmaPrologue() {
	s := k.s
	r := k.loaderRow()
	qRow := k.bin32("add.s32", k.q0, r)
	qPtr := k.elemAddr(k.gQ, qRow, s.d, k.chunkCol)
	qFull := k.cmp("le", k.bin32("add.s32", k.q0, k.imm(attnBM)), k.imm(s.sq))
	k.copyTile("", qFull, qPtr, qRow, attnBM, s.sq, s.d, s.d, "0", k.gQ)
	k.op("cp.async.commit_group")
	k.op("cp.async.wait_all")
	k.op("fence.proxy.async.shared::cta")
	k.op("bar.sync", "1", k.imm(attnThreads))
}

// tmaProduce is the producer warp's loop: K_t then V_t for t = 0..nT-1, each once the tile
// before it in the same slot has been released by both CTAs.
func (k *attnGen) tmaProduce() {
	e, tm := k.e, &k.tm
	t := k.mov32("0")
	head, done := e.label(), e.label()
	e.place(head)
	more := k.cmp("lt", t, k.nT)
	e.opIf("!"+more, "bra", done)
	reuse := k.cmp("ge", t, k.imm(k.c.stages))
	prev := k.bin32("sub.s32", t, k.imm(k.c.stages))
	k.tmaWait(k.and(tm.leader, reuse), barEmptyK, prev)
	k.tmaIssue(false, t, k.pTrue)
	k.tmaWait(k.and(tm.leader, reuse), barEmptyV, prev)
	k.tmaIssue(true, t, k.pTrue)
	k.op("add.s32", t, t, "1")
	e.opIf("", "bra", head)
	e.place(done)
}

// tmaLoop is the compute warps' loop over key tiles 0..nT-1: scores of tile j and P V of tile
// j-1, as the lockstep kernel, waiting on full barriers and releasing slots on empty ones.
func (k *attnGen) tmaLoop() {
	s, e := k.s, k.e
	j := k.mov32("0")
	mStart := k.maskStart()
	for first := true; ; first = false {
		head, done := e.label(), e.label()
		if !first {
			e.place(head)
			more := k.cmp("lt", j, k.nT)
			e.opIf("!"+more, "bra", done)
		}
		jm1 := k.bin32("sub.s32", j, "1")
		k.tmaWait("", barFullK, j)
		if !first {
			k.tmaWait("", barFullV, jm1)
		}
		k.op("wgmma.fence.sync.aligned")
		k.issueScores()
		k.ring(k.kComp, s.qBytes(), s.kSlot())
		if !first {
			k.issuePV()
			k.op("wgmma.wait_group.sync.aligned", "1")
		} else {
			k.op("wgmma.wait_group.sync.aligned", "0")
		}
		k.tmaRelease(barEmptyK, j)
		noMask := e.label()
		need := k.cmp("ge", j, mStart)
		e.opIf("!"+need, "bra", noMask)
		k.mask(j)
		e.place(noMask)
		alpha := k.softmax()
		if !first {
			k.op("wgmma.wait_group.sync.aligned", "0")
			k.tmaRelease(barEmptyV, jm1)
		}
		k.rescaleAndPack(alpha)
		k.op("add.s32", j, j, "1")
		if !first {
			e.opIf("", "bra", head)
			e.place(done)
			return
		}
	}
}

// and returns a fresh predicate a && b.
func (k *attnGen) and(a, b string) string {
	p := k.r("p")
	k.op("and.pred", p, a, b)
	return p
}

// tmaEpilogue: the last P V and the store.
func (k *attnGen) tmaEpilogue() {
	last := k.bin32("sub.s32", k.nT, "1")
	k.tmaWait("", barFullV, last)
	k.op("wgmma.fence.sync.aligned")
	k.issuePV()
	k.op("wgmma.wait_group.sync.aligned", "0")
	k.store()
}

// tmaBody: the producer warp branches to its loop; both paths meet at the closing cluster
// barrier (no remote arrival or copy may reach an exited CTA).
func (k *attnGen) tmaBody(params int) {
	e := k.e
	k.tmaSetup(params)
	produce, end := e.label(), e.label()
	e.opIf(k.tm.producer, "bra", produce)
	k.op("setmaxnreg.inc.sync.aligned.u32", "240")
	k.tmaPrologue()
	k.tmaLoop()
	k.tmaEpilogue()
	e.opIf("", "bra", end)
	e.place(produce)
	k.op("setmaxnreg.dec.sync.aligned.u32", "24")
	first := k.r("p")
	k.op("setp.lt.u32", first, k.tid, k.imm(attnThreads+32))
	e.opIf("!"+first, "bra", end) // the producer's other three warps only wait at the end
	k.tmaProduce()
	e.place(end)
	k.clusterSync()
}
