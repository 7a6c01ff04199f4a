package ptx

// Ping-pong mode of the attention kernel (attnCfg.ping). With both warpgroups copying and a
// CTA barrier per key tile, the two run in lockstep: both wait for their scores at the same
// time and both drain the tensor cores at the end of every tile. Here warpgroup 0 alone copies
// (Q, K and V) and warpgroup 1 only computes, and the two take turns issuing their tensor-core
// work (scores of tile j and P V of tile j-1), so the exponentials of one overlap the matrix
// products of the other.
//
// Named barriers (ids 1..15, count 256 = one warpgroup arriving, the other syncing, except
// INTRA):
//
//	INTRA      warpgroup 0's own copies are complete (count 128)
//	TURN[w]    warpgroup w may issue: the other arrives after issuing its own
//	KF/VF[s]   the K/V tile in slot s is ready: warpgroup 0 arrives, 1 syncs
//	KE/VE[s]   warpgroup 1 is done reading the K/V tile in slot s: 1 arrives, 0 syncs before
//	           overwriting it (warpgroup 0's own reads are finished in program order)
//
// Every barrier generation gets exactly one arrival and one sync of 128 threads each: a slot is
// released (KE/VE) only when a later tile will be copied into it, and warpgroup 0 syncs TURN[0]
// once more at the end to take warpgroup 1's last arrival. The CPU simulator checks that
// balance (ptxsim_test.go); the GPU run checks the rest.

const (
	pingMaxStages = 3
	barIntra      = 1
	barTurn       = 2 // + w
	barSlots      = 4 // KF, KE, VF, VE: stages ids each
)

type pingState struct {
	j        string // key tile index of the loop
	myTurn   string // TURN[w] of this thread's warpgroup
	nextTurn string // TURN[1-w]
}

func (k *attnGen) kf() int { return barSlots }
func (k *attnGen) ke() int { return barSlots + k.c.stages }
func (k *attnGen) vf() int { return barSlots + 2*k.c.stages }
func (k *attnGen) ve() int { return barSlots + 3*k.c.stages }

// barID is base + t%stages (t >= 0).
func (k *attnGen) barID(base int, t string) string {
	return k.bin32("add.s32", k.bin32("rem.u32", t, k.imm(k.c.stages)), k.imm(base))
}

// pred returns a fresh predicate a && b (either may be "", meaning true).
func (k *attnGen) and(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	p := k.r("p")
	k.op("and.pred", p, a, b)
	return p
}

// cmp returns a fresh predicate (a op b) for a .s32 setp form.
func (k *attnGen) cmp(op, a, b string) string {
	p := k.r("p")
	k.op("setp."+op+".s32", p, a, b)
	return p
}

func (k *attnGen) barSync(pred, id string, count int) {
	k.e.opIf(pred, "bar.sync", id, k.imm(count))
}

func (k *attnGen) barArrive(pred, id string, count int) {
	k.e.opIf(pred, "bar.arrive", id, k.imm(count))
}

func (k *attnGen) pingSetup() {
	k.producer, k.consumer = k.r("p"), k.r("p")
	k.op("setp.eq.u32", k.producer, k.wg, "0")
	k.op("not.pred", k.consumer, k.producer)
	k.pp.myTurn = k.bin32("add.s32", k.wg, k.imm(barTurn))
	k.pp.nextTurn = k.bin32("sub.s32", k.imm(barTurn+1), k.wg)
}

// emptyWait makes the producer wait until warpgroup 1 released the slot of tile t (when t
// reuses a slot and the CTA visits it).
func (k *attnGen) emptyWait(base int, t string) {
	p := k.and(k.producer, k.and(k.cmp("ge", t, k.imm(k.c.stages)), k.cmp("lt", t, k.nT)))
	k.barSync(p, k.barID(base, t), 256)
}

// pingLoop runs key tiles 0..nT-1.
func (k *attnGen) pingLoop() {
	s, e, c := k.s, k.e, k.c
	j := k.mov32("0")
	k.pp.j = j
	mStart := k.maskStart()
	// Warpgroup 1 hands warpgroup 0 the first turn.
	k.barArrive(k.consumer, k.imm(barTurn), 256)
	for first := true; ; first = false {
		head, done := e.label(), e.label()
		if !first {
			e.place(head)
			more := k.cmp("lt", j, k.nT)
			e.opIf("!"+more, "bra", done)
		}
		// K_j (and Q) and V_(j-1) are ready: the producer waits for its copies, tells the
		// consumer; the consumer waits for that.
		jm1 := k.bin32("add.s32", j, k.imm(c.stages-1)) // j-1 mod stages, without going negative
		k.op("cp.async.wait_group", k.imm(2*(c.stages-2)))
		k.op("fence.proxy.async.shared::cta")
		k.barSync(k.producer, k.imm(barIntra), 128)
		kf, vf := k.barID(k.kf(), j), k.barID(k.vf(), jm1)
		k.barArrive(k.producer, kf, 256)
		k.barSync(k.consumer, kf, 256)
		if !first {
			k.barArrive(k.producer, vf, 256)
			k.barSync(k.consumer, vf, 256)
		}
		// My turn on the tensor cores.
		k.barSync("", k.pp.myTurn, 256)
		k.op("wgmma.fence.sync.aligned")
		k.issueScores()
		k.ring(k.kComp, s.qBytes(), s.kSlot())
		if !first {
			k.issuePV()
		}
		k.barArrive("", k.pp.nextTurn, 256)
		// The producer's copies of K_(j+stages-1) and V_(j+stages-2), once their slots are free.
		k.pingLoadK()
		k.pingLoadV()
		if !first {
			k.op("wgmma.wait_group.sync.aligned", "1")
		} else {
			k.op("wgmma.wait_group.sync.aligned", "0")
		}
		// The consumer is done with K_j; release its slot if a later tile goes there.
		rel := k.and(k.consumer, k.cmp("lt", k.bin32("add.s32", j, k.imm(c.stages)), k.nT))
		k.barArrive(rel, k.barID(k.ke(), j), 256)
		noMask := e.label()
		need := k.cmp("ge", j, mStart)
		e.opIf("!"+need, "bra", noMask)
		k.mask(j)
		e.place(noMask)
		alpha := k.softmax()
		if !first {
			k.op("wgmma.wait_group.sync.aligned", "0")
			// Done with V_(j-1).
			rel := k.and(k.consumer, k.cmp("lt", k.bin32("add.s32", j, k.imm(c.stages-1)), k.nT))
			k.barArrive(rel, k.barID(k.ve(), jm1), 256)
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

// pingLoadK issues the producer's copies of the next K tile once its slot is free, as one
// group; pingLoadV likewise. Each key tile commits one K and one V group (empty past the
// CTA's tiles), so at the start of tile j the groups of K_j and V_(j-1) are followed by
// 2*(stages-2) younger ones.
func (k *attnGen) pingLoadK() {
	if !k.c.has("noloads") {
		k.emptyWait(k.ke(), k.kIdx)
		k.loadK()
	}
	k.op("cp.async.commit_group")
}

func (k *attnGen) pingLoadV() {
	if !k.c.has("noloads") {
		k.emptyWait(k.ve(), k.vIdx)
		k.loadV()
	}
	k.op("cp.async.commit_group")
}

// pingEpilogue: V_(T-1) ready, the last P V in turn, warpgroup 0 takes the last turn
// arrival, then the store.
func (k *attnGen) pingEpilogue() {
	c := k.c
	k.op("cp.async.wait_all")
	k.op("fence.proxy.async.shared::cta")
	k.barSync(k.producer, k.imm(barIntra), 128)
	last := k.bin32("add.s32", k.nT, k.imm(c.stages-1))
	vf := k.barID(k.vf(), last)
	k.barArrive(k.producer, vf, 256)
	k.barSync(k.consumer, vf, 256)
	k.barSync("", k.pp.myTurn, 256)
	k.op("wgmma.fence.sync.aligned")
	k.issuePV()
	k.barArrive("", k.pp.nextTurn, 256)
	k.op("wgmma.wait_group.sync.aligned", "0")
	k.barSync(k.producer, k.imm(barTurn), 256)
	k.store()
}
