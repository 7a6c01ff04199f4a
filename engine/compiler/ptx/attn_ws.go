package ptx

// Warp-specialised mode of the attention kernel (attnCfg.ws). The lockstep kernel loses its
// time to the schedule, not the copies (docs/PERF.md: 1.12 ms without any K/V copies, 0.90 ms
// when the two compute warpgroups take turns on the tensor cores); taking turns with one of
// them also copying made the copies the bound. Here a third warpgroup only copies: Q, then K_t
// and V_t for every key tile, by cp.async, each thread's copies signalling a full barrier when
// they land (cp.async.mbarrier.arrive.noinc), so it runs up to a ring ahead and never waits
// for its own copies. The two compute warpgroups take turns issuing their tensor-core work
// (named barriers TURN[w]): the exponentials of one overlap the products of the other.
// setmaxnreg moves registers from the copier (40) to the compute warpgroups (232): 384 threads
// get only 168 each at launch.
//
// Barriers (mbarriers in shared memory after the rings):
//
//	fullQ, fullK[s], fullV[s]  128 arrivals: every copier thread once its copies landed
//	emptyK[s], emptyV[s]       8 arrivals: lane 0 of each compute warp once its warp is done
//	                           reading the slot; the copier waits before refilling it
//
// Tile t is use t/stages of slot t%stages: its waits test phase parity (t/stages)&1.
// Named barriers 2 and 3 (TURN[0], TURN[1], 256 threads): warpgroup w syncs TURN[w] before
// issuing and arrives at TURN[1-w] after; warpgroup 1 arrives once first and warpgroup 0 syncs
// once more at the end, so every generation has one arrival and one sync of 128 threads.

const (
	wsCopiers  = 128
	wsCopyRegs = "40"
	wsMathRegs = "232"
	barTurn    = 2 // + w
)

// Barrier kinds, each with one barrier per ring slot; the Q barrier follows them.
const (
	barFullK = iota
	barFullV
	barEmptyK
	barEmptyV
	barKinds
)

var attnWSOps = []string{
	"mbarrier.init.shared::cta.b64", "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.shared::cta.b64",
	"cp.async.mbarrier.arrive.noinc.shared::cta.b64", "setmaxnreg.inc.sync.aligned.u32", "setmaxnreg.dec.sync.aligned.u32",
	"bar.arrive", "setp.eq.u32", "setp.ge.u32",
}

func init() {
	for _, op := range attnWSOps {
		knownOps[op] = true
	}
}

func (s attnSpec) barOffset(c attnCfg) int { return s.qBytes() + c.stages*(s.kSlot()+s.vSlot()) }

func wsBarriers(c attnCfg) int { return barKinds*c.stages + 1 }

type wsState struct {
	bars     string // shared address of barrier 0
	copier   string // predicate: this thread is in the copying warpgroup
	lane0    string
	myTurn   string
	nextTurn string
}

// barAddr is the shared address of the barrier of kind for ring slot slot (a register).
func (k *attnGen) barAddr(kind int, slot string) string {
	return k.mad32(slot, "8", k.bin32("add.s32", k.ws.bars, k.imm(8*kind*k.c.stages)))
}

func (k *attnGen) qBar() string {
	return k.bin32("add.s32", k.ws.bars, k.imm(8*barKinds*k.c.stages))
}

func (k *attnGen) slotOf(t string) string { return k.bin32("rem.u32", t, k.imm(k.c.stages)) }

func (k *attnGen) parityOf(t string) string {
	return k.bin32("and.b32", k.bin32("div.u32", t, k.imm(k.c.stages)), "1")
}

// waitPhase spins until the barrier at addr completes the phase of the given parity; pred
// limits the waiting threads ("" = all).
func (k *attnGen) waitPhase(pred, addr, parity string) {
	e := k.e
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

// waitTile waits for tile t's phase of its slot's barrier of kind.
func (k *attnGen) waitTile(pred string, kind int, t string) {
	k.waitPhase(pred, k.barAddr(kind, k.slotOf(t)), k.parityOf(t))
}

func (k *attnGen) wsSetup() {
	w := &k.ws
	w.bars = k.bin32("add.s32", k.base, k.imm(k.s.barOffset(k.c)))
	w.copier, w.lane0 = k.r("p"), k.r("p")
	k.op("setp.ge.u32", w.copier, k.tid, k.imm(attnThreads))
	k.op("setp.eq.u32", w.lane0, k.lane, "0")
	w.myTurn = k.bin32("add.s32", k.wg, k.imm(barTurn))
	w.nextTurn = k.bin32("sub.s32", k.imm(barTurn+1), k.wg)
	first := k.r("p")
	k.op("setp.eq.u32", first, k.tid, "0")
	for i := range wsBarriers(k.c) {
		n := itoa(wsCopiers)
		if kind := i / k.c.stages; kind == barEmptyK || kind == barEmptyV {
			n = itoa(attnThreads / 32)
		}
		k.e.opIf(first, "mbarrier.init.shared::cta.b64", "["+w.bars+"+"+itoa(8*i)+"]", n)
	}
	k.op("bar.sync", "0")
}

// wsBody: setup, then the copier and the compute warpgroups part ways.
func (k *attnGen) wsBody() {
	e := k.e
	k.wsSetup()
	copy, end := e.label(), e.label()
	e.opIf(k.ws.copier, "bra", copy)
	k.op("setmaxnreg.inc.sync.aligned.u32", wsMathRegs)
	k.wsCompute()
	e.opIf("", "bra", end)
	e.place(copy)
	k.op("setmaxnreg.dec.sync.aligned.u32", wsCopyRegs)
	k.wsCopy()
	e.place(end)
}

// wsCopy is the copier warpgroup: Q, then K_t and V_t for t = 0..nT-1, each once both compute
// warpgroups are done with the tile stages before it in the same slot.
func (k *attnGen) wsCopy() {
	s, e := k.s, k.e
	r := k.loaderRow()
	qRow := k.bin32("add.s32", k.q0, r)
	qPtr := k.elemAddr(k.gQ, qRow, s.d, k.chunkCol)
	qFull := k.cmp("le", k.bin32("add.s32", k.q0, k.imm(attnBM)), k.imm(s.sq))
	k.copyTile("", qFull, qPtr, qRow, attnBM, s.sq, s.d, s.d, "0", k.gQ)
	k.op("cp.async.mbarrier.arrive.noinc.shared::cta.b64", "["+k.qBar()+"]")
	t := k.mov32("0")
	head, done := e.label(), e.label()
	e.place(head)
	e.opIf("!"+k.cmp("lt", t, k.nT), "bra", done)
	reuse := k.cmp("ge", t, k.imm(k.c.stages))
	prev := k.bin32("sub.s32", t, k.imm(k.c.stages))
	slot := k.slotOf(t)
	k.waitTile(reuse, barEmptyK, prev)
	k.loadK()
	k.op("cp.async.mbarrier.arrive.noinc.shared::cta.b64", "["+k.barAddr(barFullK, slot)+"]")
	k.waitTile(reuse, barEmptyV, prev)
	k.loadV()
	k.op("cp.async.mbarrier.arrive.noinc.shared::cta.b64", "["+k.barAddr(barFullV, slot)+"]")
	k.op("add.s32", t, t, "1")
	e.opIf("", "bra", head)
	e.place(done)
	k.op("cp.async.wait_all") // nothing of this thread's may be in flight when it exits
}

// release: this warp is done reading the slot of tile t.
func (k *attnGen) release(kind int, t string) {
	st := k.r("rd")
	k.e.opIf(k.ws.lane0, "mbarrier.arrive.shared::cta.b64", st, "["+k.barAddr(kind, k.slotOf(t))+"]")
}

// wsCompute is the two compute warpgroups: the lockstep kernel's loop with barriers instead
// of its own copies, taking turns on the tensor cores.
func (k *attnGen) wsCompute() {
	s, w := k.s, &k.ws
	k.waitPhase("", k.qBar(), "0")
	wg1 := k.r("p")
	k.op("setp.eq.u32", wg1, k.wg, "1")
	k.e.opIf(wg1, "bar.arrive", k.imm(barTurn), k.imm(attnThreads))
	mStart := k.maskStart()
	k.tileLoop(func(j string, first bool) {
		jm1 := k.bin32("sub.s32", j, "1")
		k.waitTile("", barFullK, j)
		if !first {
			k.waitTile("", barFullV, jm1)
		}
		// cp.async writes through the generic proxy; wgmma reads through the async proxy.
		k.op("fence.proxy.async.shared::cta")
		k.op("bar.sync", w.myTurn, k.imm(attnThreads))
		k.op("wgmma.fence.sync.aligned")
		k.issueScores()
		k.ring(k.kComp, s.qBytes(), s.kSlot())
		if !first {
			k.issuePV()
		}
		k.op("bar.arrive", w.nextTurn, k.imm(attnThreads))
		if !first {
			k.op("wgmma.wait_group.sync.aligned", "1")
		} else {
			k.op("wgmma.wait_group.sync.aligned", "0")
		}
		k.release(barEmptyK, j)
		alpha := k.probabilities(j, mStart)
		if !first {
			k.op("wgmma.wait_group.sync.aligned", "0")
			k.release(barEmptyV, jm1)
		}
		k.rescaleAndPack(alpha)
	})
	last := k.bin32("sub.s32", k.nT, "1")
	k.waitTile("", barFullV, last)
	k.op("fence.proxy.async.shared::cta")
	k.op("bar.sync", w.myTurn, k.imm(attnThreads))
	k.op("wgmma.fence.sync.aligned")
	k.issuePV()
	k.op("bar.arrive", w.nextTurn, k.imm(attnThreads))
	k.op("wgmma.wait_group.sync.aligned", "0")
	wg0 := k.r("p")
	k.op("not.pred", wg0, wg1)
	k.e.opIf(wg0, "bar.sync", k.imm(barTurn), k.imm(attnThreads)) // warpgroup 1's last arrival
	k.store()
}
